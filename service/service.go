// Package service runs a burnpoller replica: the probe and metrics server,
// start-up waiting, readiness, the newHeads watcher and the live loop, with
// New, Start and Stop. cmd/poller builds its parts and wires it.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/probe"
	"github.com/burnpoller/burnpoller/webhooks"
)

// Config is a replica's behaviour.
type Config struct {
	Prep   Prep
	Writer poller.WriterConfig
	// Loop's DrainTimeout and Wake are set by the service.
	Loop poller.LoopConfig
	// HTTPAddr is where /livez, /readyz and /metrics listen.
	HTTPAddr string
	// ShutdownTimeout bounds Stop from the moment it is called: the
	// in-flight transaction may use all of it but a reserve, in which the
	// HTTP server stops.
	ShutdownTimeout time.Duration
	// HeadsURL, if set, is a ws/wss endpoint whose newHeads end the wait
	// after reaching the target early.
	HeadsURL string
	// Webhooks, if set, delivers payment events beside the loop, from the
	// moment the start-up checks pass until the replica stops.
	Webhooks *webhooks.Dispatcher
}

// Service is one replica. Its methods are safe to call from several
// goroutines; Stop is safe to call twice or without Start.
type Service struct {
	cfg     Config
	deps    Deps
	reg     *prometheus.Registry
	metrics *poller.Metrics
	log     *slog.Logger
	beat    *poller.Heartbeat
	srv     *probe.Server
	ready   prometheus.Gauge

	running  atomic.Pointer[poller.Loop]
	members  atomic.Pointer[poller.MemberBackfiller]
	stopping atomic.Bool

	mu       sync.Mutex // guards started and cancel
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	stopOnce sync.Once
	stopErr  error
	bg       sync.WaitGroup
}

// New binds the HTTP address and builds the service; nothing runs until
// Start. reg is where the metrics are registered and what /metrics serves.
func New(cfg Config, deps Deps, reg *prometheus.Registry, metrics *poller.Metrics) (*Service, error) {
	s := &Service{cfg: cfg, deps: deps, reg: reg, metrics: metrics, log: deps.Log, beat: poller.NewHeartbeat(), done: make(chan struct{})}
	s.ready = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "burnpoller_ready",
		Help: "1 while every readiness check passes, evaluated every 15 seconds.",
	})
	if err := reg.Register(s.ready); err != nil {
		return nil, fmt.Errorf("registering burnpoller_ready: %w", err)
	}
	srv, err := probe.Listen(cfg.HTTPAddr, probe.Handler(s.live, s.checks(), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// Addr is the bound HTTP address.
func (s *Service) Addr() string { return s.srv.Addr().String() }

// Heartbeat is the loop's liveness heartbeat.
func (s *Service) Heartbeat() *poller.Heartbeat { return s.beat }

// Start serves the HTTP endpoints at once, so that /readyz can say what is
// missing, and starts the replica's work in the background: waiting for the
// database, the schema, the hook and the node, then the loop. It returns
// once the HTTP server is serving; Done is closed when the work ends (Stop,
// UntilCaughtUp reached, or a failure Err reports).
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.started:
		return errors.New("service already started")
	case s.stopping.Load():
		return errors.New("service stopped")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.srv.Start()
	s.bg.Go(func() {
		probe.Watch(ctx, s.checks(), 15*time.Second, func(ok bool) { s.ready.Set(map[bool]float64{true: 1}[ok]) })
	})
	go func() {
		defer close(s.done)
		s.err = s.run(ctx)
	}()
	return nil
}

// Done is closed when the replica's work has ended.
func (s *Service) Done() <-chan struct{} { return s.done }

// Err is why the work ended, once Done is closed (it waits for that): nil
// after Stop, a service never started, or a
// caught-up UntilCaughtUp run; an error wrapping ErrRefused for a
// configuration the start-up refused; a *poller.ViolationError when an
// UntilCaughtUp run latched one; another error otherwise.
func (s *Service) Err() error {
	<-s.done
	return s.err
}

// drainReserve is the part of SHUTDOWN_TIMEOUT kept for the HTTP server and
// the pool after the in-flight transaction.
func (s *Service) drainReserve() time.Duration { return min(s.cfg.ShutdownTimeout/4, time.Second) }

func (s *Service) run(ctx context.Context) error {
	s.log.Info("burnpoller starting", slog.String("http_addr", s.Addr()), slog.String("node", s.deps.Nodes.String()),
		slog.Uint64("chain_id", s.cfg.Writer.ChainID), slog.Any("contracts", s.cfg.Writer.Contracts),
		slog.String("cursor_id", s.cfg.Loop.CursorID))
	hook, err := Prepare(ctx, s.cfg.Prep, s.deps, s.beat.Beat)
	if err != nil {
		if ctx.Err() != nil {
			s.log.Info("stopped during start-up")
			return nil
		}
		return fmt.Errorf("start-up: %w", err)
	}
	wcfg, lc := Writer(s.cfg.Writer, hook, s.cfg.Prep.HookSQL), s.cfg.Loop
	if g := wcfg.Group; g != nil && g.DefaultID {
		id, err := s.resolveGroup(ctx, *g)
		if err != nil {
			return err
		}
		group := *g
		group.CursorID, wcfg.Group, lc.CursorID = id, &group, id
	}
	w := poller.NewWriter(wcfg, s.deps.Store, s.deps.Nodes, s.metrics, s.log)
	lc.DrainTimeout = s.cfg.ShutdownTimeout - s.drainReserve()
	if s.cfg.HeadsURL != "" {
		wake := make(chan struct{}, 1)
		lc.Wake = wake
		hctx, stopHeads := context.WithCancel(ctx)
		heads := make(chan struct{})
		go func() {
			defer close(heads)
			chain.WatchHeads(hctx, s.cfg.HeadsURL, wake, s.metrics.HeadsUp, s.log)
		}()
		defer func() { stopHeads(); <-heads }()
	}
	if s.cfg.Webhooks != nil {
		dctx, stopHooks := context.WithCancel(ctx)
		hooksDone := make(chan struct{})
		go func() {
			defer close(hooksDone)
			_ = s.cfg.Webhooks.Run(dctx)
		}()
		defer func() { stopHooks(); <-hooksDone }()
	}
	if s.cfg.Writer.Group != nil {
		mb := poller.NewMemberBackfiller(w, max(lc.PollInterval, time.Second), s.log)
		s.members.Store(mb)
		mctx, stopMembers := context.WithCancel(ctx)
		membersDone := make(chan struct{})
		go func() {
			defer close(membersDone)
			mb.Run(mctx)
		}()
		defer func() { stopMembers(); <-membersDone }()
	}
	loop := poller.NewLoop(lc, w, s.metrics, s.beat, s.log)
	s.running.Store(loop)
	if err := loop.Run(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	s.log.Info("poller stopped")
	return nil
}

// resolveGroup finds the group of a replica without CURSOR_ID by its
// recorded contracts, retrying while the database does not answer.
func (s *Service) resolveGroup(ctx context.Context, g poller.GroupConfig) (string, error) {
	b := StartupBackoff()
	for {
		s.beat.Beat()
		id, err := poller.ResolveGroup(ctx, s.deps.Store, s.cfg.Writer.ChainID, s.cfg.Writer.Contracts, g.CursorID)
		switch {
		case err == nil:
			if id != g.CursorID {
				s.log.Info("the group is found by its recorded contracts; it keeps its cursor id",
					slog.String("cursor_id", id), slog.String("default_cursor_id", g.CursorID))
			}
			return id, nil
		case errors.Is(err, poller.ErrGroupAmbiguous):
			return "", fmt.Errorf("start-up: %w: %w", ErrRefused, err)
		case ctx.Err() != nil:
			return "", nil
		}
		s.log.Warn("finding the group failed; retrying", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(b.NextBackOff()):
		}
	}
}

// Stop ends the work: a lock wait at once, an in-flight transaction within
// ShutdownTimeout less a reserve (rolled back when it runs out), then the
// HTTP server within what is left. It blocks until done.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		deadline := time.Now().Add(s.cfg.ShutdownTimeout - 100*time.Millisecond)
		s.mu.Lock()
		cancel := s.cancel
		s.mu.Unlock()
		if cancel != nil {
			cancel()
			<-s.done
			s.bg.Wait()
		} else {
			close(s.done) // never started: nothing to wait for
		}
		if soonest := time.Now().Add(50 * time.Millisecond); deadline.Before(soonest) {
			deadline = soonest
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		if err := s.srv.Stop(ctx); err != nil {
			s.stopErr = fmt.Errorf("stopping the HTTP server: %w", err)
		}
	})
	return s.stopErr
}

// live is /livez: the loop is stalled if it has not come round for longer
// than its slowest legitimate iteration: a lock wait plus a whole
// transaction plus the longest back-off, with room to spare.
func (s *Service) live() error {
	stallAfter := s.cfg.Writer.LockWait + s.cfg.Writer.TxTimeout + max(s.cfg.Loop.PollInterval, 30*time.Second) + 30*time.Second
	if since := s.beat.Since(); since > stallAfter {
		return fmt.Errorf("no progress for %s", since.Round(time.Second))
	}
	return nil
}

// checks are /readyz's. Their errors are short states, never configuration.
func (s *Service) checks() []probe.Check {
	return []probe.Check{
		{Name: "database", Func: func(ctx context.Context) error {
			switch err := s.deps.Store.Writable(ctx); {
			case errors.Is(err, payments.ErrReadOnly):
				return errors.New("read-only")
			case err != nil:
				return errors.New("unreachable")
			}
			return nil
		}},
		{Name: "migrations", Func: func(ctx context.Context) error {
			switch err := migrations.Check(ctx, s.deps.Pool); {
			case errors.Is(err, migrations.ErrPending):
				return errors.New("pending")
			case errors.Is(err, migrations.ErrTooNew):
				return errors.New("schema newer than binary")
			case err != nil:
				return errors.New("unknown")
			}
			return nil
		}},
		{Name: "node", Func: s.deps.Nodes.Health},
		{Name: "poller", Func: func(ctx context.Context) error {
			l := s.running.Load()
			switch {
			case s.stopping.Load():
				return errors.New("shutting down")
			case l == nil:
				return errors.New("starting")
			}
			return l.Health()
		}},
		{Name: "contracts", Func: func(context.Context) error {
			if mb := s.members.Load(); mb != nil {
				return mb.Health()
			}
			return nil
		}},
	}
}
