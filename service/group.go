package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/probe"
)

// group is one group of a replica: its start-up, its loop and what
// readiness knows of it. Nothing of it is shared with another group but
// the process's pools, so a group whose node hangs or lies costs the
// others nothing.
type group struct {
	cfg  Group
	s    *Service
	log  *slog.Logger
	beat *poller.Heartbeat

	running atomic.Pointer[poller.Loop]
	members atomic.Pointer[poller.MemberBackfiller]
	// refused is the short state of a refusal at start ("wrong chain
	// id"), nil while none.
	refused atomic.Pointer[string]

	// ready is burnpoller_ready of a named group; needsOp its
	// burnpoller_needs_operator.
	ready   prometheus.Gauge
	needsOp prometheus.Gauge
}

func newGroup(cfg Group, s *Service) (*group, error) {
	g := &group{cfg: cfg, s: s, log: s.deps.Log, beat: poller.NewHeartbeat()}
	if cfg.Name != "" {
		g.log = g.log.With(slog.String("group", cfg.Name))
		g.ready = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_ready",
			Help: "1 while the replica's checks and the group's pass, evaluated every 15 seconds.",
		})
		if err := cfg.Registerer.Register(g.ready); err != nil {
			return nil, fmt.Errorf("registering burnpoller_ready of group %s: %w", cfg.Name, err)
		}
	}
	g.needsOp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "burnpoller_needs_operator",
		Help: "1 while the group waits for an operator on this replica: a latched finality violation, or a start-up refused (a node on another chain, no finality tag, a payment hook refused).",
	})
	if err := cfg.Registerer.Register(g.needsOp); err != nil {
		return nil, fmt.Errorf("registering burnpoller_needs_operator: %w", err)
	}
	return g, nil
}

// run prepares the group (its node at once, its hook once schema is
// closed), then runs its loop until ctx ends. It returns nil when ctx
// ended it, an error wrapping ErrRefused for a refused start-up, or the
// loop's error.
func (g *group) run(ctx context.Context, schema <-chan struct{}) error {
	w := g.cfg.Writer
	g.log.Info("burnpoller starting", slog.String("http_addr", g.s.Addr()), slog.String("node", g.cfg.Nodes.String()),
		slog.Uint64("chain_id", w.ChainID), slog.Any("contracts", w.Contracts),
		slog.String("cursor_id", g.cfg.Loop.CursorID))
	hook, err := g.prepare(ctx, schema)
	if err != nil {
		return g.startupFailed(ctx, err)
	}
	wcfg, lc := Writer(w, hook, g.cfg.Prep.HookSQL), g.cfg.Loop
	if gc := wcfg.Group; gc != nil && gc.DefaultID {
		id, err := g.resolveGroup(ctx, *gc)
		if err != nil {
			return g.startupFailed(ctx, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		resolved := *gc
		resolved.CursorID, wcfg.Group, lc.CursorID = id, &resolved, id
	}
	if g.s.cfg.Spread && g.s.cfg.Members != nil {
		// Listed while the loop is healthy: a group whose loop latched or
		// keeps failing here is left to the others.
		lc.Holder = g.s.cfg.Members.Serve(lc.CursorID, func() bool {
			l := g.running.Load()
			return l != nil && l.Health() == nil
		})
	}
	g.s.startWebhooks(ctx)
	writer := poller.NewWriter(wcfg, g.s.deps.Store, g.cfg.Nodes, g.cfg.Metrics, g.log)
	lc.DrainTimeout = g.s.cfg.ShutdownTimeout - g.s.drainReserve()
	if g.cfg.HeadsURL != "" {
		wake := make(chan struct{}, 1)
		lc.Wake = wake
		defer g.beside(ctx, func(ctx context.Context) {
			chain.WatchHeads(ctx, g.cfg.HeadsURL, wake, g.cfg.Metrics.HeadsUp, g.log)
		})()
	}
	if wcfg.Group != nil {
		mb := poller.NewMemberBackfiller(writer, max(lc.PollInterval, time.Second), g.log)
		g.members.Store(mb)
		defer g.beside(ctx, mb.Run)()
	}
	loop := poller.NewLoop(lc, writer, g.cfg.Metrics, g.beat, g.log)
	g.running.Store(loop)
	if err := loop.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// beside runs f until the group's work ends; the function it returns
// stops f and waits for it.
func (g *group) beside(ctx context.Context, f func(context.Context)) func() {
	ctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() { stop(); <-done }
}

// startupFailed records a refusal and returns it; a start-up ended by ctx
// (a stop, or another part's failure) is nobody's refusal.
func (g *group) startupFailed(ctx context.Context, err error) error {
	if !errors.Is(err, ErrRefused) {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	state := refusalState(err)
	g.refused.Store(&state)
	g.needsOp.Set(1)
	if g.cfg.Name == "" {
		return err
	}
	g.log.Error("group refused at start; the replica goes on with its other groups", slog.Any("err", err))
	return fmt.Errorf("group %s: %w", g.cfg.Name, err)
}

// refusalState is the short state /readyz shows for a refused start-up.
func refusalState(err error) string {
	switch {
	case errors.Is(err, chain.ErrWrongChain):
		return "wrong chain id"
	case errors.Is(err, chain.ErrFinalityUnsupported):
		return "finality tag not supported by the node"
	case errors.Is(err, payments.ErrHookMismatch):
		return "payment hook differs from the group's"
	case errors.Is(err, payments.ErrBadHook):
		return "payment hook does not prepare"
	case errors.Is(err, poller.ErrGroupAmbiguous):
		return "several groups follow its contracts"
	}
	return "refused"
}

// prepare waits for what the group's writer needs before its first
// transaction: the node (chain id, finality tag) at once, the hook
// (prepared) once the schema is ready, then the hook agreed with the
// group's other writers. The first refusal of either side ends the other.
func (g *group) prepare(parent context.Context, schema <-chan struct{}) (*payments.Hook, error) {
	st := &startup{p: g.cfg.Prep, d: g.deps(), beat: g.beat.Beat}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	nodeDone := make(chan struct{})
	go func() {
		defer close(nodeDone)
		if err := st.node(ctx); err != nil {
			cancel(err)
		}
	}()
	var hook *payments.Hook
	err := func() error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-schema:
		}
		var err error
		hook, err = st.hook(ctx)
		return err
	}()
	if err != nil {
		cancel(err)
	}
	<-nodeDone
	switch {
	case parent.Err() != nil:
		// Stopped, or another part failed: not this group's refusal.
		return nil, parent.Err()
	case ctx.Err() != nil:
		// The side that failed first names the failure; the other only
		// saw its context end.
		return nil, context.Cause(ctx)
	}
	if err := st.agreeOnHook(parent); err != nil {
		return nil, err
	}
	return hook, nil
}

// deps are the replica's parts with the group's node and log.
func (g *group) deps() Deps {
	d := g.s.deps
	d.Nodes, d.Log = g.cfg.Nodes, g.log
	return d
}

// resolveGroup finds the group of a replica without CURSOR_ID by its
// recorded contracts, retrying while the database does not answer.
func (g *group) resolveGroup(ctx context.Context, gc poller.GroupConfig) (string, error) {
	b := StartupBackoff()
	for {
		g.beat.Beat()
		id, err := poller.ResolveGroup(ctx, g.s.deps.Store, g.cfg.Writer.ChainID, g.cfg.Writer.Contracts, gc.CursorID)
		switch {
		case err == nil:
			if id != gc.CursorID {
				g.log.Info("the group is found by its recorded contracts; it keeps its cursor id",
					slog.String("cursor_id", id), slog.String("default_cursor_id", gc.CursorID))
			}
			return id, nil
		case errors.Is(err, poller.ErrGroupAmbiguous):
			return "", fmt.Errorf("%w: %w", ErrRefused, err)
		case ctx.Err() != nil:
			return "", nil
		}
		g.log.Warn("finding the group failed; retrying", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(b.NextBackOff()):
		}
	}
}

// live is the group's part of /livez: its loop has come round within its
// slowest legitimate iteration (a lock wait plus a whole transaction plus
// the longest back-off, with room to spare). A refused group runs nothing.
func (g *group) live() error {
	if g.refused.Load() != nil {
		return nil
	}
	w, l := g.cfg.Writer, g.cfg.Loop
	stallAfter := w.LockWait + w.TxTimeout + max(l.PollInterval, 30*time.Second) + 30*time.Second
	if since := g.beat.Since(); since > stallAfter {
		return fmt.Errorf("no progress for %s", since.Round(time.Second))
	}
	return nil
}

// checks are the group's readiness checks.
func (g *group) checks() []probe.Check {
	return []probe.Check{
		{Name: "node", Func: g.cfg.Nodes.Health},
		{Name: "poller", Func: func(context.Context) error {
			l := g.running.Load()
			switch {
			case g.s.stopping.Load():
				return errors.New("shutting down")
			case g.refused.Load() != nil && g.cfg.Name != "":
				return errors.New(*g.refused.Load())
			case l == nil:
				return errors.New("starting")
			}
			return l.Health()
		}},
		{Name: "contracts", Func: func(context.Context) error {
			if mb := g.members.Load(); mb != nil {
				return mb.Health()
			}
			return nil
		}},
	}
}

// needsOperator says the group waits for someone to act on this replica:
// a refused start-up, or a latched finality violation.
func (g *group) needsOperator() bool {
	if g.refused.Load() != nil {
		return true
	}
	l := g.running.Load()
	return l != nil && l.Violation() != ""
}

func (g *group) reportNeedsOperator() {
	g.needsOp.Set(map[bool]float64{true: 1}[g.needsOperator()])
}
