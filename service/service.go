// Package service runs a burnpoller replica: the probe and metrics server,
// start-up waiting, readiness, and for each group it serves the newHeads
// watcher, the contract backfill and the live loop, with New, Start and
// Stop. cmd/poller builds its parts and wires it.
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
	"github.com/burnpoller/burnpoller/spread"
	"github.com/burnpoller/burnpoller/webhooks"
)

// Config is a replica's behaviour.
type Config struct {
	// Migrate applies the migrations at start; otherwise start-up waits
	// for them. (The groups' Prep.Migrate is not read.)
	Migrate bool
	// Groups are the groups the replica serves: one, without a name,
	// without GROUPS.
	Groups []Group
	// HTTPAddr is where /livez, /readyz and /metrics listen.
	HTTPAddr string
	// ShutdownTimeout bounds Stop from the moment it is called: the
	// in-flight transactions may use all of it but a reserve, in which the
	// HTTP server stops.
	ShutdownTimeout time.Duration
	// Webhooks, if set, delivers payment events beside the loops, from the
	// moment the first group's start-up checks pass until the replica
	// stops.
	Webhooks *webhooks.Dispatcher
	// Members, if set, is the replica's row in replica_members, beaten from
	// the moment the schema is ready: it names the release the replica
	// runs and the schema its binary brings (a contract step waits while
	// a replica of an older one lives) and, with Spread, the groups it
	// serves.
	Members *spread.Members
	// Spread spreads the groups over the replica set through Members: each
	// group the replica serves is listed while its loop is healthy, and
	// each loop follows its group's preferred holder
	// (poller.LoopConfig.Holder).
	Spread bool
}

// named says the groups have names (GROUPS): each is served on its own,
// and a group refused at start leaves the others running.
func (c Config) named() bool { return len(c.Groups) > 0 && c.Groups[0].Name != "" }

// Group is one group a replica serves: its node, its writer and its loop.
type Group struct {
	// Name is the group's name in GROUPS; "" for the one group without.
	Name   string
	Prep   Prep
	Writer poller.WriterConfig
	// Loop's DrainTimeout and Wake are set by the service.
	Loop poller.LoopConfig
	// HeadsURL, if set, is a ws/wss endpoint whose newHeads end the wait
	// after reaching the target early.
	HeadsURL string
	// Nodes are the group's own endpoints; Metrics its own collectors.
	Nodes   *chain.Endpoints
	Metrics *poller.Metrics
	// Registerer is where the group's readiness gauges are registered:
	// the replica's registry for the one group, the registry labelled
	// with the name (group="eth") for a named one.
	Registerer prometheus.Registerer
}

// Service is one replica. Its methods are safe to call from several
// goroutines; Stop is safe to call twice or without Start.
type Service struct {
	cfg    Config
	deps   Deps
	reg    *prometheus.Registry
	log    *slog.Logger
	groups []*group
	srv    *probe.Server
	// ready is burnpoller_ready of a replica of one group; a named group
	// has its own.
	ready    prometheus.Gauge
	stopping atomic.Bool
	// hooksOnce starts the webhook dispatcher once.
	hooksOnce sync.Once

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
// Start. reg is where the process's metrics are registered and what
// /metrics serves (the groups' are registered through their Registerer).
func New(cfg Config, deps Deps, reg *prometheus.Registry) (*Service, error) {
	if len(cfg.Groups) == 0 {
		return nil, errors.New("service: no group to serve")
	}
	s := &Service{cfg: cfg, deps: deps, reg: reg, log: deps.Log, done: make(chan struct{})}
	for _, gc := range cfg.Groups {
		g, err := newGroup(gc, s)
		if err != nil {
			return nil, err
		}
		s.groups = append(s.groups, g)
	}
	if !cfg.named() {
		s.ready = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_ready",
			Help: "1 while every readiness check passes, evaluated every 15 seconds.",
		})
		if err := reg.Register(s.ready); err != nil {
			return nil, fmt.Errorf("registering burnpoller_ready: %w", err)
		}
	}
	srv, err := probe.Listen(cfg.HTTPAddr, probe.HandlerFor(s.live, s.readiness(), promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// Addr is the bound HTTP address.
func (s *Service) Addr() string { return s.srv.Addr().String() }

// Start serves the HTTP endpoints at once, so that /readyz can say what is
// missing, and starts the replica's work in the background: waiting for the
// database and the schema, and for each group its node and hook, then its
// loop. It returns once the HTTP server is serving; Done is closed when the
// work ends (Stop, UntilCaughtUp reached, or a failure Err reports).
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
		probe.WatchReadiness(ctx, s.readiness(), 15*time.Second, s.report)
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
// after Stop, a service never started, or a caught-up UntilCaughtUp run;
// an error wrapping ErrRefused for a configuration the start-up refused
// (with named groups, once every group was refused); a *poller.ViolationError
// when an UntilCaughtUp run latched one; another error otherwise.
func (s *Service) Err() error {
	<-s.done
	return s.err
}

// drainReserve is the part of SHUTDOWN_TIMEOUT kept for the HTTP server and
// the pool after the in-flight transaction.
func (s *Service) drainReserve() time.Duration { return min(s.cfg.ShutdownTimeout/4, time.Second) }

// run waits for the database and the schema once, and meanwhile runs every
// group: its node checks at once, its hook once the schema is ready, then
// its loop. A failure of the database side that waiting cannot fix ends
// every group. Without GROUPS, the one group's refusal ends the replica,
// as it always did; with them, a refused group is told (log, readiness,
// burnpoller_needs_operator) and the others go on, until none is left.
func (s *Service) run(stop context.Context) error {
	ctx, cancel := context.WithCancelCause(stop)
	defer cancel(nil)
	schema := make(chan struct{})
	dbDone := make(chan error, 1)
	go func() {
		err := s.prepareDatabase(ctx, stop)
		if err != nil {
			cancel(err)
		} else {
			s.startSpread(ctx)
			close(schema)
		}
		dbDone <- err
	}()
	if s.cfg.Members != nil {
		defer s.cfg.Members.Stop()
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		refused int
	)
	for _, g := range s.groups {
		wg.Go(func() {
			err := g.run(ctx, schema)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
			if errors.Is(err, ErrRefused) {
				refused++
			}
			if !s.cfg.named() || refused == len(s.groups) {
				cancel(err)
			}
		})
	}
	wg.Wait()
	cancel(nil)
	dbErr := <-dbDone
	if stop.Err() != nil {
		s.log.Info("poller stopped")
		return nil
	}
	if cause := context.Cause(ctx); dbErr != nil && cause != nil && !errors.Is(dbErr, cause) && !errors.Is(dbErr, context.Canceled) {
		// A group was refused first, and then a migration begun
		// meanwhile failed on its own: the refusal is returned, this is
		// told.
		s.log.Warn("the database side of start-up failed as well", slog.Any("err", dbErr))
	}
	switch {
	case dbErr != nil && !errors.Is(dbErr, context.Canceled):
		return fmt.Errorf("start-up: %w", dbErr)
	case len(errs) > 0 && (!s.cfg.named() || refused == len(errs) && refused == len(s.groups)):
		return startupErr(errors.Join(errs...))
	case len(errs) > 0:
		// An UntilCaughtUp run: every group's outcome counts.
		return errors.Join(errs...)
	}
	s.log.Info("poller stopped")
	return nil
}

// startupErr names a refusal as start-up's; a loop's own error (a
// violation latched by an UntilCaughtUp run) is returned as it is.
func startupErr(err error) error {
	if errors.Is(err, ErrRefused) {
		return fmt.Errorf("start-up: %w", err)
	}
	return err
}

// prepareDatabase waits for the database and the schema, applying the
// migrations when asked; every group's heartbeat beats meanwhile.
func (s *Service) prepareDatabase(ctx, stop context.Context) error {
	st := &startup{p: Prep{Migrate: s.cfg.Migrate}, d: s.deps, beat: func() {
		for _, g := range s.groups {
			g.beat.Beat()
		}
	}}
	if err := st.database(ctx); err != nil {
		return err
	}
	return st.schema(ctx, stop)
}

// startSpread starts the replica's membership, once the schema holds its
// table.
func (s *Service) startSpread(ctx context.Context) {
	if s.cfg.Members != nil {
		_ = s.cfg.Members.Start(ctx)
	}
}

// startWebhooks starts the dispatcher once, when the first group is ready
// to run; it stops with the replica.
func (s *Service) startWebhooks(ctx context.Context) {
	if s.cfg.Webhooks == nil {
		return
	}
	s.hooksOnce.Do(func() {
		s.bg.Go(func() { _ = s.cfg.Webhooks.Run(ctx) })
	})
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

// live is /livez: every group that runs has come round within its slowest
// legitimate iteration (a refused group runs nothing and is left out).
func (s *Service) live() error {
	for _, g := range s.groups {
		if err := g.live(); err != nil {
			if g.cfg.Name != "" {
				return fmt.Errorf("group %s: %w", g.cfg.Name, err)
			}
			return err
		}
	}
	return nil
}

// readiness is /readyz's: the process's checks, then the one group's
// beside them, or each named group's apart. Their errors are short
// states, never configuration.
func (s *Service) readiness() probe.Readiness {
	process := []probe.Check{
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
	}
	if !s.cfg.named() {
		return probe.Readiness{Checks: append(process, s.groups[0].checks()...)}
	}
	r := probe.Readiness{Checks: process}
	for _, g := range s.groups {
		r.Groups = append(r.Groups, probe.Group{Name: g.cfg.Name, Checks: g.checks(), NeedsOperator: g.needsOperator})
	}
	return r
}

// report exports a readiness evaluation: burnpoller_ready (per group with
// GROUPS: 1 while the process's checks and the group's pass) and
// burnpoller_needs_operator.
func (s *Service) report(st probe.Status) {
	if !s.cfg.named() {
		s.ready.Set(map[bool]float64{true: 1}[st.Status == "ready"])
		s.groups[0].reportNeedsOperator()
		return
	}
	processOK := true
	for _, state := range st.Checks {
		processOK = processOK && state == "ok"
	}
	for _, g := range s.groups {
		g.ready.Set(map[bool]float64{true: 1}[processOK && st.Groups[g.cfg.Name].Status == probe.GroupReady])
		g.reportNeedsOperator()
	}
}
