package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
	"github.com/burnpoller/burnpoller/spread"
	"github.com/burnpoller/burnpoller/webhooks"
)

// cmdRun runs a replica of every group until SIGTERM or SIGINT (or, with
// --until-finalized, until each has caught up).
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
	c, code := newCommand(stderr, config.ScopeServe, nil, nil)
	if c == nil {
		return code
	}
	defer c.stop()
	pt, err := c.open(false, c.set.Groups...)
	if err != nil {
		c.log.Error("starting", slog.Any("err", err))
		return exitFailure
	}
	defer pt.close()
	// Webhook deliveries use a pool of their own, so that a slow endpoint
	// never holds a connection the ledger needs.
	var dispatcher *webhooks.Dispatcher
	if wcfg, ok := c.cfg.WebhookConfig(); ok && !*until {
		hookPool, err := database.Open(c.ctx, c.cfg.WebhookDatabase(), false, migrations.SessionName("burnpoller-webhooks"))
		if err != nil {
			c.log.Error("starting", slog.Any("err", err))
			return exitFailure
		}
		defer hookPool.Close()
		// Wake-ups (LISTEN) need a session: DATABASE_DIRECT_URL's when set.
		// Through a transaction pooler without it they never come, and
		// deliveries are found by polling, every second.
		wcfg.Listen = pt.sessions.Pool
		dispatcher = webhooks.New(wcfg, hookPool, pt.reg, c.log)
	}
	scfg := service.Config{
		Migrate:         c.cfg.Migrate,
		HTTPAddr:        c.cfg.HTTPAddr,
		ShutdownTimeout: c.cfg.ShutdownTimeout,
		Webhooks:        dispatcher,
	}
	for _, g := range pt.groups {
		scfg.Groups = append(scfg.Groups, serviceGroup(g, *until))
	}
	if !*until {
		// Every replica names its release in replica_members (a contract
		// step waits for the older ones to go), beaten as often as the
		// quickest group polls; with GROUPS, the replica set spreads the
		// groups through the same rows: each has a preferred holder among
		// the live replicas.
		quickest := c.set.Groups[0].PollInterval
		for _, g := range c.set.Groups {
			quickest = min(quickest, g.PollInterval)
		}
		mcfg := spread.ForPollInterval(quickest)
		mcfg.Release, mcfg.Schema = release(), migrations.Latest()
		scfg.Members = spread.New(pt.pool, mcfg, c.log)
		scfg.Spread = c.set.Named()
	}
	svc, err := service.New(scfg, pt.deps(c.log), pt.reg)
	if err != nil {
		c.log.Error("starting the HTTP server", slog.Any("err", err))
		return exitFailure
	}
	if err := svc.Start(c.ctx); err != nil {
		c.log.Error("starting", slog.Any("err", err))
		return exitFailure
	}
	select {
	case <-c.ctx.Done():
	case <-svc.Done():
	}
	if err := svc.Stop(); err != nil {
		c.log.Warn("stopping", slog.Any("err", err))
	}
	err = svc.Err()
	var v *poller.ViolationError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &v):
		c.log.Error("stopped on a finality violation", slog.Any("err", err))
		return exitFailure
	}
	c.log.Error("start-up failed", slog.Any("err", err))
	return exitCode(err)
}

// serviceGroup is the service's view of one group: its parts and its
// configuration; until makes it a one-shot run up to the target.
func serviceGroup(g groupParts, until bool) service.Group {
	cfg := g.cfg.Config
	return service.Group{
		Name:   g.cfg.Name,
		Prep:   prep(cfg),
		Writer: writerConfig(cfg),
		Loop: poller.LoopConfig{
			CursorID:       cfg.GroupCursor(),
			StartBlock:     poller.GroupStart(cfg.Contracts(), cfg.StartBlock),
			PollInterval:   cfg.PollInterval,
			RescanDepth:    cfg.RescanDepth,
			RescanInterval: cfg.RescanInterval,
			UntilCaughtUp:  until,
			// --until-caught-up is a one-shot run: nothing to track.
			Pending:          cfg.Pending && !until,
			PendingMaxBlocks: cfg.PendingMaxBlocks,
		},
		HeadsURL:   cfg.RPCWSURL,
		Nodes:      g.nodes,
		Metrics:    g.metrics,
		Registerer: g.registerer,
	}
}
