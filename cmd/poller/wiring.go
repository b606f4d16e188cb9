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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
)

// command is what every subcommand starts from: its configuration, a logger
// and a context cancelled by the first SIGTERM or SIGINT.
type command struct {
	cfg config.Config
	log *slog.Logger
	ctx context.Context //nolint:containedctx // the process's: cancelled by the first SIGTERM or SIGINT
	// stop releases the signal handlers; signalled tells which signal, if
	// any, cancelled ctx.
	stop      func()
	signalled func() os.Signal
}

// newCommand loads the configuration of scope and reports every problem,
// with flagProblems first, one line each; it returns nil and exit code 2
// when there are any. Signal handlers are installed before anything else
// starts, so that a signal during start-up gets the same orderly shutdown.
func newCommand(stderr io.Writer, s config.Scope, flagProblems []string) (*command, int) {
	cfg, problems := config.Load(s)
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
	// sessions is the pool for migrations and LISTEN.
	sessions database.Sessions
}

// open builds the parts; readOnly makes every database session read-only.
func (c *command) open(readOnly bool) (*parts, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := poller.NewMetrics(reg, version, revision(), runtime.Version())
	pool, err := database.Open(c.ctx, c.cfg.Database(), readOnly, "burnpoller")
	if err != nil {
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	store := payments.NewStore(pool)
	reg.MustRegister(poller.NewQueueUsageCollector(store.NotificationQueueUsage, 2*time.Second))
	sessions, err := database.OpenSessions(c.ctx, c.cfg.Database(), "burnpoller-session")
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
	return &parts{reg: reg, metrics: metrics, pool: pool, store: store, nodes: nodes, sessions: sessions}, nil
}

// close closes the node clients, then the pools.
func (p *parts) close() {
	p.nodes.Close()
	p.sessions.Close()
	p.pool.Close()
}

func (p *parts) deps(log *slog.Logger) service.Deps {
	return service.Deps{Pool: p.pool, Store: p.store, Nodes: p.nodes, Log: log, Sessions: p.sessions.Pool,
		CheckSessions: p.sessions.Check}
}

// writerConfig is the contract's writer, before its hook is prepared.
func (c *command) writerConfig() poller.WriterConfig {
	return poller.WriterConfig{
		ChainID:       c.cfg.ChainID,
		Contracts:     poller.Addresses(c.cfg.Contracts()),
		Group:         c.groupConfig(),
		MaxBlockRange: c.cfg.MaxRange(),
		LockWait:      c.cfg.LockWait,
		TxTimeout:     c.cfg.TxTimeout,
	}
}

// groupConfig is the live group's cursor and its contracts' first blocks.
func (c *command) groupConfig() *poller.GroupConfig {
	cs := c.cfg.Contracts()
	g := &poller.GroupConfig{CursorID: c.cfg.GroupCursor(), DefaultID: c.cfg.CursorID == "", AllowRemoval: c.cfg.AllowContractRemoval}
	for _, ct := range cs {
		g.FirstBlocks = append(g.FirstBlocks, ct.FirstBlock(c.cfg.StartBlock))
	}
	return g
}

// prep is what a writer of the contract waits for at start.
func (c *command) prep() service.Prep {
	return service.Prep{
		ChainID:          c.cfg.ChainID,
		Contracts:        poller.Addresses(c.cfg.Contracts()),
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
func dialEndpoints(ctx context.Context, cfg config.Config, obs chain.EndpointsObserver, log *slog.Logger) (*chain.Endpoints, error) {
	var clients []*chain.Client
	for _, u := range cfg.RPCURLs() {
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
		GrowTo:        cfg.MaxRange(),
		Quorum:        cfg.RPCQuorum,
	}, obs, log), nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
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
