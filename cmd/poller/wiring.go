package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
)

// command is what every subcommand starts from: its configuration, a logger
// and a context cancelled by the first SIGTERM or SIGINT.
type command struct {
	cfg Config
	log *slog.Logger
	ctx context.Context
	// stop releases the signal handlers; signalled tells which signal, if
	// any, cancelled ctx.
	stop      func()
	signalled func() os.Signal
}

// newCommand loads the configuration of scope and reports every problem,
// with flagProblems first, one line each; it returns nil and exit code 2
// when there are any. Signal handlers are installed before anything else
// starts, so that a signal during start-up gets the same orderly shutdown.
func newCommand(stderr io.Writer, s scope, flagProblems []string) (*command, int) {
	cfg, problems := loadConfig(s)
	if code := reportProblems(stderr, append(flagProblems, problems...)); code != exitOK {
		return nil, code
	}
	log := newLogger(cfg, stderr)
	ctx, stop, signalled := notifyStopSignal(log)
	return &command{cfg: cfg, log: log, ctx: ctx, stop: stop, signalled: signalled}, exitOK
}

// parts are the concrete dependencies of every command that reads the chain.
type parts struct {
	reg     *prometheus.Registry
	metrics *poller.Metrics
	pool    *pgxpool.Pool
	store   *payments.Store
	nodes   *chain.Endpoints
	// sessions is the pool for migrations and LISTEN (see
	// newSessionPool); direct says it is DATABASE_DIRECT_URL's.
	sessions *pgxpool.Pool
	direct   bool
}

// open builds the parts; readOnly makes every database session read-only.
func (c *command) open(readOnly bool) (*parts, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := poller.NewMetrics(reg, version, revision(), runtime.Version())
	pool, err := newPool(c.ctx, c.cfg, readOnly, "burnpoller")
	if err != nil {
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	store := payments.NewStore(pool)
	reg.MustRegister(poller.NewQueueUsageCollector(store.NotificationQueueUsage, 2*time.Second))
	sessions, direct, err := newSessionPool(c.ctx, c.cfg, "burnpoller-session")
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	nodes, err := dialEndpoints(c.ctx, c.cfg, metrics, c.log)
	if err != nil {
		pool.Close()
		sessions.Close()
		return nil, fmt.Errorf("configuring the node client: %w", err)
	}
	return &parts{reg: reg, metrics: metrics, pool: pool, store: store, nodes: nodes, sessions: sessions, direct: direct}, nil
}

// close closes the node clients, then the pools.
func (p *parts) close() {
	p.nodes.Close()
	p.sessions.Close()
	p.pool.Close()
}

func (p *parts) deps(log *slog.Logger) service.Deps {
	return service.Deps{Pool: p.pool, Store: p.store, Nodes: p.nodes, Log: log, Sessions: p.sessions,
		CheckSessions: func(ctx context.Context, what string) error { return checkSessions(ctx, p.sessions, p.direct, what) }}
}

// writerConfig is the contract's writer, before its hook is prepared.
func (c *command) writerConfig() poller.WriterConfig {
	return poller.WriterConfig{
		ChainID:       c.cfg.ChainID,
		Contracts:     poller.Addresses(c.cfg.contracts()),
		Group:         c.groupConfig(),
		MaxBlockRange: c.cfg.maxRange(),
		LockWait:      c.cfg.LockWait,
		TxTimeout:     c.cfg.TxTimeout,
	}
}

// groupConfig is the live group's cursor and its contracts' first blocks.
func (c *command) groupConfig() *poller.GroupConfig {
	cs := c.cfg.contracts()
	g := &poller.GroupConfig{CursorID: c.cfg.cursorID(), DefaultID: c.cfg.CursorID == "", AllowRemoval: c.cfg.AllowContractRemoval}
	for _, ct := range cs {
		g.FirstBlocks = append(g.FirstBlocks, ct.FirstBlock(c.cfg.StartBlock))
	}
	return g
}

// prep is what a writer of the contract waits for at start.
func (c *command) prep() service.Prep {
	return service.Prep{
		ChainID:          c.cfg.ChainID,
		Contracts:        poller.Addresses(c.cfg.contracts()),
		Migrate:          c.cfg.Migrate,
		HookSQL:          c.cfg.PaymentHookSQL,
		ReplaceGroupHook: c.cfg.AllowHookChange,
	}
}

// exitCode is the exit status for an error start-up returned.
func exitCode(err error) int {
	if errors.Is(err, service.ErrRefused) {
		return exitUsage
	}
	return exitFailure
}

// dialEndpoints prepares a client for each RPC_URL endpoint.
// A nil obs discards the observations.
func dialEndpoints(ctx context.Context, cfg Config, obs chain.EndpointsObserver, log *slog.Logger) (*chain.Endpoints, error) {
	var clients []*chain.Client
	for _, u := range cfg.rpcURLs() {
		var copts chain.Options
		copts.Timeout = cfg.RPCTimeout
		copts.VerifyReceipts = cfg.VerifyReceipts
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
		GrowTo:        cfg.maxRange(),
		Quorum:        cfg.RPCQuorum,
	}, obs, log), nil
}

// newPool opens a pool on DATABASE_URL; its sessions are named app (in
// pg_stat_activity) unless the URL names them.
func newPool(ctx context.Context, cfg Config, readOnly bool, app string) (*pgxpool.Pool, error) {
	pc, ref, err := poolConfig(cfg.DatabaseURL, "DATABASE_URL", cfg, readOnly, app)
	if err != nil {
		return nil, err
	}
	// By default one connection works, one serves probes, the rest absorb
	// a slow release.
	pc.MaxConns = cfg.DatabaseMaxConns
	pool, err := ref.open(ctx, pc)
	if err != nil || !readOnly {
		return pool, err
	}
	// Read-only sessions are asked for with a startup parameter, which a
	// pooler may refuse (PgBouncer: "unsupported startup parameter").
	// Setting it per session instead would leak to other clients of a
	// transaction pooler, so such a pool reads without it: the commands
	// that ask for it only read.
	if err := pool.Ping(ctx); err != nil && strings.Contains(err.Error(), "unsupported startup parameter") {
		pool.Close()
		delete(pc.ConnConfig.RuntimeParams, "default_transaction_read_only")
		return ref.open(ctx, pc)
	}
	return pool, nil
}

// newSessionPool opens the pool for what needs a session of its own:
// migrations (tern's session lock) and LISTEN. It reaches Postgres through
// DATABASE_DIRECT_URL when set, else DATABASE_URL; direct says which.
// Nothing connects until it is used.
func newSessionPool(ctx context.Context, cfg Config, app string) (pool *pgxpool.Pool, direct bool, _ error) {
	dsn, key := cfg.DatabaseURL, "DATABASE_URL"
	if cfg.DatabaseDirectURL != "" {
		dsn, key = cfg.DatabaseDirectURL, "DATABASE_DIRECT_URL"
	}
	pc, ref, err := poolConfig(dsn, key, cfg, false, app)
	if err != nil {
		return nil, false, err
	}
	pc.MaxConns = 2
	// Used at start (migrations) and by one held LISTEN session: an idle
	// connection is not kept (on a server that may since have been
	// demoted, say).
	pc.MaxConnIdleTime = time.Minute
	pool, err = ref.open(ctx, pc)
	return pool, cfg.DatabaseDirectURL != "", err
}

// errNoSessionsHint is what to do when DATABASE_URL goes through a
// transaction pooler and something needs a session.
const errNoSessionsHint = "set DATABASE_DIRECT_URL to a connection string that reaches Postgres itself (not the pooler)"

// checkSessions returns an error wrapping payments.ErrNoSessions when pool
// (made from DATABASE_URL, not direct) does not keep sessions.
func checkSessions(ctx context.Context, pool *pgxpool.Pool, direct bool, what string) error {
	if direct {
		return nil
	}
	ok, err := payments.KeepsSessions(ctx, pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("DATABASE_URL: %w: %s needs a session; %s", payments.ErrNoSessions, what, errNoSessionsHint)
	}
	return nil
}

// poolConfig parses dsn (the variable key) with the settings every pool
// shares: the exec mode, timeouts, the session name, and dropping a
// connection to a server that turned read-only.
func poolConfig(dsn, key string, cfg Config, readOnly bool, app string) (*pgxpool.Config, *poolRef, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a valid connection string%s", key, dsnProblem(err))
	}
	pc.MinConns = 0
	pc.HealthCheckPeriod = 15 * time.Second
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = app
	}
	if readOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	// A connection string may name its own mode
	// (default_query_exec_mode=...); DATABASE_EXEC_MODE applies otherwise.
	if !strings.Contains(dsn, "default_query_exec_mode") {
		pc.ConnConfig.DefaultQueryExecMode = execModes[cfg.DatabaseExecMode]
	}
	// A server that refuses writes because it is (now) a standby, after a
	// failover, keeps refusing: the connection that met it is dropped, and
	// so is every other one of the pool (they reach the same server), so
	// that the next goes where target_session_attrs=read-write finds the
	// primary.
	pool := &poolRef{}
	pc.ConnConfig.OnPgError = func(_ *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == "25006" {
			pool.reset()
			return false
		}
		return !strings.EqualFold(e.Severity, "FATAL")
	}
	return pc, pool, nil
}

// poolRef lets a connection's error handler reach its pool, which exists
// only once open has made it from the config.
type poolRef struct{ p atomic.Pointer[pgxpool.Pool] }

// open makes the pool of pc, the config poolConfig returned with r.
func (r *poolRef) open(ctx context.Context, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err == nil {
		r.p.Store(pool)
	}
	return pool, err
}

// reset drops the pool's idle connections, and the others as they are
// released; not from the handler's goroutine, which holds a connection.
func (r *poolRef) reset() {
	if p := r.p.Load(); p != nil {
		go p.Reset()
	}
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cfg.LogLevel]
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// notifyStopSignal returns a context cancelled by the first SIGTERM or
// SIGINT (a second one exits the process at once), a function releasing
// the handlers, and one telling which signal, if any, cancelled the context.
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
