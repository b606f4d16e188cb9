package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
	"github.com/burnpoller/burnpoller/webhooks"
)

// cmdRun runs a replica until SIGTERM or SIGINT (or, with
// --until-finalized, until it has caught up).
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
	c, code := newCommand(stderr, config.ScopeRun, nil)
	if c == nil {
		return code
	}
	defer c.stop()
	pt, err := c.open(false)
	if err != nil {
		c.log.Error("starting", slog.Any("err", err))
		return exitFailure
	}
	defer pt.close()
	// Webhook deliveries use a pool of their own, so that a slow endpoint
	// never holds a connection the ledger needs.
	var dispatcher *webhooks.Dispatcher
	if wcfg, ok := c.cfg.WebhookConfig(); ok && !*until {
		hookPool, err := database.Open(c.ctx, c.cfg.Database(), false, "burnpoller-webhooks")
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
	svc, err := service.New(service.Config{
		Prep:   c.prep(),
		Writer: c.writerConfig(),
		Loop: poller.LoopConfig{
			CursorID:       c.cfg.GroupCursor(),
			StartBlock:     poller.GroupStart(c.cfg.Contracts(), c.cfg.StartBlock),
			PollInterval:   c.cfg.PollInterval,
			RescanDepth:    c.cfg.RescanDepth,
			RescanInterval: c.cfg.RescanInterval,
			UntilCaughtUp:  *until,
			// --until-caught-up is a one-shot run: nothing to track.
			Pending:          c.cfg.Pending && !*until,
			PendingMaxBlocks: c.cfg.PendingMaxBlocks,
		},
		HTTPAddr:        c.cfg.HTTPAddr,
		ShutdownTimeout: c.cfg.ShutdownTimeout,
		HeadsURL:        c.cfg.RPCWSURL,
		Webhooks:        dispatcher,
	}, pt.deps(c.log), pt.reg, pt.metrics)
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
