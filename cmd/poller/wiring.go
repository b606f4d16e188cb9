package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
)

// command is what every subcommand starts from: its configuration, a logger
// and a context cancelled by the first SIGTERM or SIGINT.
type command struct {
	set config.Set
	// cfg is what the command acts on: the group --group names (the one
	// group without GROUPS), or, for a command of every group, the
	// process's variables alone.
	cfg config.Config
	// group is the group --group named; "" for none.
	group string
	log   *slog.Logger
	ctx   context.Context //nolint:containedctx // the process's: cancelled by the first SIGTERM or SIGINT
	// stop releases the signal handlers; signalled tells which signal, if
	// any, cancelled ctx.
	stop      func()
	signalled func() os.Signal
}

// groupArg is a command's --group NAME: which of GROUPS it acts on.
type groupArg struct {
	name string
	// required: the command acts on one group, and with several in GROUPS
	// it must be told which.
	required bool
}

// addGroupFlag adds --group to fs.
func addGroupFlag(fs *flag.FlagSet, required bool) *groupArg {
	g := &groupArg{required: required}
	usage := "with GROUPS, the group to act on (default: every group)"
	if required {
		usage = "with GROUPS, the group to act on (needed when GROUPS names several)"
	}
	fs.StringVar(&g.name, "group", "", usage)
	return g
}

// newCommand loads the configuration of scope and reports every problem,
// with flagProblems first, one line each; it returns nil and exit code 2
// when there are any. group, if not nil, is the command's --group. Signal
// handlers are installed before anything else starts, so that a signal
// during start-up gets the same orderly shutdown. Configuration warnings
// are logged.
func newCommand(stderr io.Writer, s config.Scope, flagProblems []string, group *groupArg) (*command, int) {
	set, problems := config.Load(s)
	cfg, name, groupProblem := chooseGroup(set, group)
	if groupProblem != "" {
		flagProblems = append(flagProblems, groupProblem)
	}
	if code := reportProblems(stderr, append(flagProblems, problems...)); code != exitOK {
		return nil, code
	}
	log := newLogger(set.Config, stderr)
	for _, w := range set.Warnings {
		log.Warn("configuration warning", slog.String("warning", w))
	}
	ctx, stop, signalled := notifyStopSignal(log)
	return &command{set: set, cfg: cfg, group: name, log: log, ctx: ctx, stop: stop, signalled: signalled}, exitOK
}

// chooseGroup is the configuration a command acts on, by its --group.
func chooseGroup(set config.Set, group *groupArg) (config.Config, string, string) {
	switch {
	case !set.Named() && group != nil && group.name != "":
		return set.Config, "", fmt.Sprintf("--group %s: GROUPS is not set; the unprefixed variables are the one group", group.name)
	case !set.Named():
		return set.Groups[0].Config, "", ""
	case group == nil:
		return set.Config, "", ""
	case group.name != "":
		g, ok := set.Group(strings.ToLower(group.name))
		if !ok {
			return set.Config, "", fmt.Sprintf("--group %s: no such group in GROUPS (%s)", group.name, set.GroupNames)
		}
		return g.Config, g.Name, ""
	case len(set.Groups) == 1:
		return set.Groups[0].Config, set.Groups[0].Name, ""
	case group.required:
		return set.Config, "", fmt.Sprintf("--group is required: GROUPS names %s", set.GroupNames)
	}
	return set.Config, "", ""
}

// parts are the concrete dependencies of every command that reads the chain.
type parts struct {
	reg   *prometheus.Registry
	pool  *pgxpool.Pool
	store *payments.Store
	// sessions is the pool for migrations and LISTEN.
	sessions database.Sessions
	groups   []groupParts
}

// groupParts are one group's: its node's endpoints and its metrics.
type groupParts struct {
	cfg        config.Group
	metrics    *poller.Metrics
	nodes      *chain.Endpoints
	registerer prometheus.Registerer
}

// open builds the process's parts and, for each group of groups, its
// own; readOnly makes every database session read-only. A named group's
// metrics carry its name (group="eth").
func (c *command) open(readOnly bool, groups ...config.Group) (*parts, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pool, err := database.Open(c.ctx, c.cfg.Database(), readOnly, migrations.SessionName("burnpoller"))
	if err != nil {
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	store := payments.NewStore(pool)
	reg.MustRegister(poller.NewQueueUsageCollector(store.NotificationQueueUsage, 2*time.Second))
	sessions, err := database.OpenSessions(c.ctx, c.cfg.Database(), migrations.SessionName("burnpoller-session"))
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("configuring the database pool: %w", err)
	}
	pt := &parts{reg: reg, pool: pool, store: store, sessions: sessions}
	named := len(groups) > 0 && groups[0].Name != ""
	if named {
		poller.RegisterBuildInfo(reg, version, revision(), runtime.Version())
	}
	for _, g := range groups {
		gp := groupParts{cfg: g, registerer: reg}
		if named {
			gp.registerer = prometheus.WrapRegistererWith(prometheus.Labels{"group": g.Name}, reg)
			gp.metrics = poller.NewGroupMetrics(gp.registerer)
		} else {
			gp.metrics = poller.NewMetrics(reg, version, revision(), runtime.Version())
		}
		weights, _ := g.ComputeUnits() // validated with the configuration
		gp.metrics.WeighCalls(weights)
		gp.nodes, err = dialEndpoints(c.ctx, g.Config, gp.metrics, c.log)
		if err != nil {
			pt.close()
			return nil, fmt.Errorf("configuring the node client of %s: %w", cmp.Or(g.Name, "the group"), err)
		}
		pt.groups = append(pt.groups, gp)
	}
	return pt, nil
}

// openGroup opens the parts of a command that acts on the one group it
// chose (--group).
func (c *command) openGroup(readOnly bool) (*parts, error) {
	return c.open(readOnly, config.Group{Name: c.group, Config: c.cfg})
}

// close closes the node clients, then the pools.
func (p *parts) close() {
	for _, g := range p.groups {
		g.nodes.Close()
	}
	p.sessions.Close()
	p.pool.Close()
}

// nodes and metrics are the one group's of a command that acts on one.
func (p *parts) nodes() *chain.Endpoints  { return p.groups[0].nodes }
func (p *parts) metrics() *poller.Metrics { return p.groups[0].metrics }

func (p *parts) deps(log *slog.Logger) service.Deps {
	d := service.Deps{Pool: p.pool, Store: p.store, Log: log, Sessions: p.sessions.Pool, CheckSessions: p.sessions.Check, Release: release()}
	if len(p.groups) == 1 {
		d.Nodes = p.groups[0].nodes
	}
	return d
}

// writerConfig is the chosen group's writer, before its hook is prepared.
func (c *command) writerConfig() poller.WriterConfig { return writerConfig(c.cfg) }

// writerConfig is cfg's group's writer, before its hook is prepared.
func writerConfig(cfg config.Config) poller.WriterConfig {
	return poller.WriterConfig{
		ChainID:       cfg.ChainID,
		Contracts:     poller.Addresses(cfg.Contracts()),
		Group:         groupConfig(cfg),
		MaxBlockRange: cfg.MaxRange(),
		LockWait:      cfg.LockWait,
		TxTimeout:     cfg.TxTimeout,
	}
}

// groupConfig is the live group's cursor and its contracts' first blocks.
func groupConfig(cfg config.Config) *poller.GroupConfig {
	g := &poller.GroupConfig{CursorID: cfg.GroupCursor(), DefaultID: cfg.CursorID == "", AllowRemoval: cfg.AllowContractRemoval}
	for _, ct := range cfg.Contracts() {
		g.FirstBlocks = append(g.FirstBlocks, ct.FirstBlock(cfg.StartBlock))
	}
	return g
}

// prep is what a writer of the chosen group waits for at start.
func (c *command) prep() service.Prep { return prep(c.cfg) }

// prep is what a writer of cfg's group waits for at start.
func prep(cfg config.Config) service.Prep {
	return service.Prep{
		ChainID:          cfg.ChainID,
		Contracts:        poller.Addresses(cfg.Contracts()),
		Migrate:          cfg.Migrate,
		HookSQL:          cfg.PaymentHookSQL,
		ReplaceGroupHook: cfg.AllowHookChange,
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
		copts.Weights, _ = cfg.ComputeUnits() // validated with the configuration
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
