// Command poller records every LogBurnWithDigest burn of one contract as
// exactly one payment row in Postgres. Run it as several replicas: they
// share a cursor row whose lock lets one work while the others stand by.
//
//	poller [run]                 poll until SIGTERM/SIGINT (the default)
//	poller backfill              record a block range, resumably
//	poller verify                compare the chain with the ledger
//	poller tail                  print payments as they commit
//	poller migrate               apply database migrations and exit
//	poller cursor show           print the cursor
//	poller cursor reset --to N   move the cursor (clears a finality violation)
//	poller config                print every variable with its default, value and meaning
//	poller version               print the build
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/probe"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `usage: poller [run|backfill|verify|cursor|tail|migrate|config|version]

  run [--until-finalized]    poll the chain and record payments until SIGTERM or SIGINT (default);
                             with --until-finalized, exit 0 once caught up with the target
  backfill --from N --to M   record every burn of blocks N..M (M may be "finalized") in chunks, each
             [--restart] [--chunk K]   its own transaction; resumable; one JSON summary on stdout
  verify --from N --to M     compare the chain's burns with the payments table; exit 0 clean, 1 on
             [--json]        discrepancies, 3 when it could not complete; never writes
  tail [--json]              print each payment as its transaction commits (LISTEN)
  migrate                    apply database migrations and exit
  cursor show [--json]       print the cursor
  cursor reset --to N        set the cursor to block N (after 'poller verify'; clears a finality violation)
             [--wait] [--allow-skip] [--reason TEXT]
  config                     print every environment variable with default, value and meaning
  version                    print the version

Configuration comes from the environment; see 'poller config'.
`

// defaultMemoryLimit is the Go runtime's soft memory limit when GOMEMLIMIT
// is not set: with ranges bounded to about 2000 logs, the heap stays small,
// and the limit keeps the garbage collector from letting it double before
// collecting. See BENCHMARKS.md for the resident memory it gives.
const defaultMemoryLimit = 32 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	// These take flags; the rest take no arguments.
	switch cmd {
	case "run":
		return cmdRun(args, stderr)
	case "backfill":
		return cmdBackfill(args, stdout, stderr)
	case "verify":
		return cmdVerify(args, stdout, stderr)
	case "cursor":
		return cmdCursor(args, stdout, stderr)
	case "tail":
		return cmdTail(args, stdout, stderr)
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "poller %s: unexpected arguments %q\n%s", cmd, args, usage)
		return exitUsage
	}
	switch cmd {
	case "migrate":
		return cmdMigrate(stdout, stderr)
	case "config":
		return cmdConfig(stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "burnpoller %s (revision %s, %s)\n", version, revision(), runtime.Version())
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "poller: unknown command %q\n%s", cmd, usage)
	return exitUsage
}

func cmdConfig(stdout, stderr io.Writer) int {
	_, problems := loadConfig(scopeRun)
	if err := printConfig(stdout); err != nil {
		fmt.Fprintln(stderr, "poller config:", err)
		return exitFailure
	}
	return reportProblems(stderr, problems)
}

func reportProblems(stderr io.Writer, problems []string) int {
	for _, p := range problems {
		fmt.Fprintln(stderr, "poller: config:", p)
	}
	if len(problems) > 0 {
		return exitUsage
	}
	return exitOK
}

func cmdMigrate(stdout, stderr io.Writer) int {
	return dbCommand(stderr, scopeMigrate, func(ctx context.Context, _ Config, log *slog.Logger, pool *pgxpool.Pool) int {
		from, err := migrate(ctx, pool)
		if err != nil {
			log.Error("migrating", slog.Any("err", err))
			return exitFailure
		}
		fmt.Fprintf(stdout, "schema at version %d (was %d)\n", migrations.Latest(), from)
		return exitOK
	})
}

// dbCommand runs f, a one-shot command against the database, with the
// configuration of scope, a logger, signal handling and a pool.
func dbCommand(stderr io.Writer, s scope, f func(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool) int) int {
	cfg, problems := loadConfig(s)
	if code := reportProblems(stderr, problems); code != exitOK {
		return code
	}
	log := newLogger(cfg, stderr)
	ctx, stop := notifyStop(log)
	defer stop()
	pool, err := newPool(ctx, cfg)
	if err != nil {
		log.Error("connecting to the database", slog.Any("err", err))
		return exitFailure
	}
	defer pool.Close()
	return f(ctx, cfg, log, pool)
}

func cmdRun(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	until := fs.Bool("until-finalized", false, "catch up to the current target (FINALITY), then exit 0")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "poller run: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	cfg, problems := loadConfig(scopeRun)
	if code := reportProblems(stderr, problems); code != exitOK {
		return code
	}
	log := newLogger(cfg, stderr)
	// Signal handlers go in before anything starts, so a signal during
	// start-up gets the same orderly shutdown.
	ctx, stop := notifyStop(log)
	defer stop()
	return serve(ctx, cfg, log, *until)
}

// parts are what every command that polls wires together.
type parts struct {
	reg     *prometheus.Registry
	metrics *poller.Metrics
	pool    *pgxpool.Pool
	store   *payments.Store
	nodes   *chain.Endpoints
}

func openParts(ctx context.Context, cfg Config, log *slog.Logger) (*parts, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := poller.NewMetrics(reg, version, revision(), runtime.Version())
	pool, err := newPool(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	nodes, err := dialEndpoints(ctx, cfg, metrics, log)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("configuring the node client: %w", err)
	}
	return &parts{reg: reg, metrics: metrics, pool: pool, store: payments.NewStore(pool), nodes: nodes}, nil
}

// close closes the node clients, then the pool.
func (pt *parts) close() {
	pt.nodes.Close()
	pt.pool.Close()
}

func (pt *parts) poller(cfg Config, drain time.Duration, hook *payments.Hook, until bool, beat *poller.Heartbeat, log *slog.Logger) *poller.Poller {
	return poller.New(poller.Config{
		CursorID:       cfg.cursorID(),
		ChainID:        cfg.ChainID,
		Contract:       common.HexToAddress(cfg.BurnContract),
		StartBlock:     cfg.StartBlock,
		PollInterval:   cfg.PollInterval,
		MaxBlockRange:  cfg.MaxBlockRange,
		LockWait:       cfg.LockWait,
		TxTimeout:      cfg.TxTimeout,
		DrainTimeout:   drain,
		RescanDepth:    cfg.RescanDepth,
		RescanInterval: cfg.RescanInterval,
		Hook:           hook,
		UntilCaughtUp:  until,
	}, pt.store, pt.nodes, pt.metrics, beat, log)
}

// serve wires the parts, starts them, and stops them in reverse order when
// ctx ends: the poller drains, then the HTTP server stops, then the node
// clients and the pool close.
func serve(ctx context.Context, cfg Config, log *slog.Logger, until bool) int {
	pt, err := openParts(ctx, cfg, log)
	if err != nil {
		log.Error("starting", slog.Any("err", err))
		return exitFailure
	}
	defer pt.close()

	// SHUTDOWN_TIMEOUT runs from the signal. The in-flight transaction may
	// use all of it but a reserve, in which the HTTP server and the pool
	// stop, so that the process is gone within it.
	reserve := min(cfg.ShutdownTimeout/4, time.Second)
	var signalled atomic.Int64
	context.AfterFunc(ctx, func() { signalled.Store(time.Now().UnixNano()) })
	stopBy := func() time.Time {
		if at := signalled.Load(); at != 0 {
			return time.Unix(0, at).Add(cfg.ShutdownTimeout - 100*time.Millisecond)
		}
		return time.Now().Add(reserve)
	}
	beat := poller.NewHeartbeat()
	var running atomic.Pointer[poller.Poller]
	checks := readinessChecks(pt, &running, ctx)
	// The loop is stalled if it has not come round for longer than its
	// slowest legitimate iteration: a lock wait plus a whole transaction
	// plus the longest back-off, with room to spare.
	stallAfter := cfg.LockWait + cfg.TxTimeout + max(cfg.PollInterval, 30*time.Second) + 30*time.Second
	live := func() error {
		if since := beat.Since(); since > stallAfter {
			return fmt.Errorf("no progress for %s", since.Round(time.Second))
		}
		return nil
	}
	srv, err := probe.Listen(cfg.HTTPAddr, probe.Handler(live, checks, promhttp.HandlerFor(pt.reg, promhttp.HandlerOpts{})))
	if err != nil {
		log.Error("starting the HTTP server", slog.Any("err", err))
		return exitFailure
	}
	srv.Start()
	ready := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "burnpoller_ready",
		Help: "1 while every readiness check passes, evaluated every 15 seconds.",
	})
	pt.reg.MustRegister(ready)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		probe.Watch(watchCtx, checks, 15*time.Second, func(ok bool) { ready.Set(map[bool]float64{true: 1}[ok]) })
	}()
	defer func() { stopWatch(); <-watching }()
	defer func() {
		by := stopBy()
		if soonest := time.Now().Add(50 * time.Millisecond); by.Before(soonest) {
			by = soonest
		}
		stopCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
		defer cancel()
		if err := srv.Stop(stopCtx); err != nil {
			log.Warn("stopping the HTTP server", slog.Any("err", err))
		}
	}()
	log.Info("burnpoller starting", slog.String("version", version), slog.String("http_addr", srv.Addr().String()),
		slog.String("node", pt.nodes.String()), slog.Uint64("chain_id", cfg.ChainID), slog.String("contract", cfg.BurnContract),
		slog.String("cursor_id", cfg.cursorID()), slog.String("finality", cfg.Finality))

	hook, code, err := startup(ctx, cfg, log, beat, pt)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped during start-up")
			return exitOK
		}
		log.Error("start-up failed", slog.Any("err", err))
		return code
	}

	p := pt.poller(cfg, cfg.ShutdownTimeout-reserve, hook, until, beat, log)
	if cfg.RPCWSURL != "" {
		wake := make(chan struct{}, 1)
		p.WakeOn(wake)
		heads := make(chan struct{})
		hctx, stopHeads := context.WithCancel(ctx)
		go func() {
			defer close(heads)
			chain.WatchHeads(hctx, cfg.RPCWSURL, wake, pt.metrics.HeadsUp, log)
		}()
		defer func() { stopHeads(); <-heads }()
	}
	running.Store(p)
	if err := p.Run(ctx); err != nil && ctx.Err() == nil {
		log.Error("poller failed", slog.Any("err", err))
		return exitFailure
	}
	log.Info("poller stopped")
	return exitOK
}

// startup waits, with back-off, for the database, the schema and the node,
// failing at once only on what waiting cannot fix: a schema newer than this
// binary, a migration the database rejects, a node on another chain, or a
// node that does not support FINALITY (the last two exit 2: configuration).
func startup(ctx context.Context, cfg Config, log *slog.Logger, beat *poller.Heartbeat, pt *parts) (*payments.Hook, int, error) {
	store, pool, nodes := pt.store, pt.pool, pt.nodes
	retry := func(what string, op func() error) error {
		_, err := backoff.Retry(ctx, func() (struct{}, error) {
			beat.Beat()
			err := op()
			// A provider's Retry-After is honoured here too, up to a minute,
			// which keeps the liveness heartbeat well within its bound.
			if ra := min(chain.RetryAfterOf(err), time.Minute); ra > 0 {
				log.Warn(what+"; the provider asks to wait", slog.Any("err", err), slog.Duration("retry_after", ra))
				return struct{}{}, backoff.RetryAfter(int(math.Ceil(ra.Seconds())))
			}
			return struct{}{}, err
		}, backoff.WithBackOff(startupBackoff()), backoff.WithMaxElapsedTime(0),
			backoff.WithNotify(func(err error, d time.Duration) {
				log.Warn(what+"; retrying", slog.Any("err", err), slog.Duration("retry_in", d))
			}))
		return err
	}

	if err := retry("database unreachable", func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return store.Ping(pctx)
	}); err != nil {
		return nil, exitFailure, err
	}
	if cfg.Migrate {
		err := retry("migrating failed", func() error {
			from, err := migrate(ctx, pool)
			if err == nil && from != migrations.Latest() {
				log.Info("migrated the database", slog.Int("from", int(from)), slog.Int("to", int(migrations.Latest())))
			}
			return permanentUnlessConnection(err)
		})
		if err != nil {
			return nil, exitFailure, err
		}
	} else {
		err := retry("database schema not ready", func() error {
			err := migrations.Check(ctx, pool)
			if errors.Is(err, migrations.ErrTooNew) {
				return backoff.Permanent(err)
			}
			return err
		})
		if err != nil {
			return nil, exitFailure, err
		}
	}

	var hook *payments.Hook
	if cfg.PaymentHookSQL != "" {
		err := retry("preparing PAYMENT_HOOK_SQL", func() error {
			var err error
			hook, err = store.PrepareHook(ctx, cfg.PaymentHookSQL)
			if errors.Is(err, payments.ErrBadHook) {
				return backoff.Permanent(err)
			}
			return err
		})
		if errors.Is(err, payments.ErrBadHook) {
			return nil, exitUsage, err
		}
		if err != nil {
			return nil, exitFailure, err
		}
	}

	err := retry("node unreachable", func() error {
		err := nodes.Verify(ctx)
		if errors.Is(err, chain.ErrWrongChain) {
			return backoff.Permanent(fmt.Errorf("%w; refusing to start", err))
		}
		return err
	})
	if err == nil {
		err = retry("checking the node's finality support", func() error {
			err := nodes.ProbeFinality(ctx)
			if errors.Is(err, chain.ErrFinalityUnsupported) {
				return backoff.Permanent(err)
			}
			return err
		})
	}
	switch {
	case errors.Is(err, chain.ErrWrongChain), errors.Is(err, chain.ErrFinalityUnsupported):
		return nil, exitUsage, err
	case err != nil:
		return nil, exitFailure, err
	}
	return hook, exitOK, nil
}

// dialEndpoints prepares a client for each RPC_URL endpoint.
// A nil obs discards the observations.
func dialEndpoints(ctx context.Context, cfg Config, obs chain.EndpointsObserver, log *slog.Logger) (*chain.Endpoints, error) {
	var clients []*chain.Client
	for _, u := range cfg.rpcURLs() {
		var copts chain.Options
		copts.Timeout = cfg.RPCTimeout
		if obs != nil {
			copts.Observer = obs
		}
		c, err := chain.Dial(ctx, u, copts)
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return nil, err
		}
		clients = append(clients, c)
	}
	return chain.NewEndpoints(clients, chain.EndpointsConfig{
		ChainID:       cfg.ChainID,
		Finality:      chain.Finality(cfg.Finality),
		Confirmations: cfg.Confirmations,
		MaxRange:      cfg.MaxBlockRange,
	}, obs, log), nil
}

func readinessChecks(pt *parts, running *atomic.Pointer[poller.Poller], life context.Context) []probe.Check {
	store, pool, nodes := pt.store, pt.pool, pt.nodes
	return []probe.Check{
		{Name: "database", Func: func(ctx context.Context) error {
			if store.Ping(ctx) != nil {
				return errors.New("unreachable")
			}
			return nil
		}},
		{Name: "migrations", Func: func(ctx context.Context) error {
			switch err := migrations.Check(ctx, pool); {
			case errors.Is(err, migrations.ErrPending):
				return errors.New("pending")
			case errors.Is(err, migrations.ErrTooNew):
				return errors.New("schema newer than binary")
			case err != nil:
				return errors.New("unknown")
			}
			return nil
		}},
		{Name: "node", Func: nodes.Health},
		{Name: "poller", Func: func(ctx context.Context) error {
			p := running.Load()
			switch {
			case life.Err() != nil:
				return errors.New("shutting down")
			case p == nil:
				return errors.New("starting")
			}
			return p.Health()
		}},
	}
}

func migrate(ctx context.Context, pool *pgxpool.Pool) (int32, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquiring a connection: %w", err)
	}
	defer conn.Release()
	return migrations.Migrate(ctx, conn.Conn())
}

// permanentUnlessConnection lets connection trouble be retried and stops on
// anything the server itself refused.
func permanentUnlessConnection(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, migrations.ErrTooNew) {
		return backoff.Permanent(err)
	}
	return err
}

func newPool(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, errors.New("DATABASE_URL is not a valid connection string")
	}
	// One connection works, one serves probes, the rest absorb a slow release.
	pc.MaxConns = 4
	pc.MinConns = 0
	pc.HealthCheckPeriod = 15 * time.Second
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "burnpoller"
	}
	if cfg.readOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

func startupBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 250 * time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 15 * time.Second
	return b
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cfg.LogLevel]
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// notifyStop returns a context cancelled by the first SIGTERM or SIGINT; a
// second one exits the process at once.
func notifyStop(log *slog.Logger) (context.Context, func()) {
	ctx, stop, _ := notifyStopSignal(log)
	return ctx, stop
}

// notifyStopSignal is notifyStop that also tells which signal, if any,
// cancelled the context.
func notifyStopSignal(log *slog.Logger) (context.Context, func(), func() os.Signal) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var got atomic.Value
	go func() {
		select {
		case s := <-sigs:
			got.Store(s)
			log.Info("signal received; stopping", slog.String("signal", s.String()))
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			log.Warn("second signal; exiting now", slog.String("signal", s.String()))
			os.Exit(exitFailure)
		case <-done:
		}
	}()
	stop := func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
	which := func() os.Signal {
		s, _ := got.Load().(os.Signal)
		return s
	}
	return ctx, stop, which
}

func revision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
