// Package probe serves the HTTP endpoints an orchestrator and Prometheus
// read: /livez, /readyz and /metrics, on a server with timeouts and a body
// limit that answers only GET (and HEAD) on those paths.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// Check is one readiness check. The text of the error it returns is shown in
// the /readyz body, so it must be a short state ("unreachable"), never a
// detail of the configuration.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// CheckTimeout bounds each readiness check.
const CheckTimeout = 3 * time.Second

// Status is the /readyz and /livez body.
type Status struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	// Groups are the named groups' states, when the process serves
	// several (GROUPS).
	Groups map[string]GroupStatus `json:"groups,omitempty"`
}

// GroupStatus is one named group's readiness in the /readyz body.
type GroupStatus struct {
	// Status is "ready", "not ready", or "needs operator" for a group that
	// waits for someone to act (a latched finality violation, a node on
	// another chain): restarting the replica will not help it.
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// The states of a group.
const (
	GroupReady         = "ready"
	GroupNotReady      = "not ready"
	GroupNeedsOperator = "needs operator"
)

// Readiness is what /readyz reports: the process's checks and, for a
// process that serves named groups, each group's.
type Readiness struct {
	Checks []Check
	// Groups, if any, make the process ready while its own checks pass
	// and at least one group is ready: it can serve that group.
	Groups []Group
}

// Group is the readiness of one named group.
type Group struct {
	Name   string
	Checks []Check
	// NeedsOperator, if set, says the group waits for an operator.
	NeedsOperator func() bool
}

// Run runs every check, the groups' too, concurrently and returns the
// combined status.
func (r Readiness) Run(ctx context.Context) Status {
	var (
		wg     sync.WaitGroup
		groups = make([]Status, len(r.Groups))
		st     Status
	)
	for i, g := range r.Groups {
		wg.Go(func() { groups[i] = Run(ctx, g.Checks) })
	}
	st = Run(ctx, r.Checks)
	wg.Wait()
	if len(r.Groups) == 0 {
		return st
	}
	st.Groups = make(map[string]GroupStatus, len(r.Groups))
	anyReady := false
	for i, g := range r.Groups {
		gs := GroupStatus{Status: GroupReady, Checks: groups[i].Checks}
		switch {
		case g.NeedsOperator != nil && g.NeedsOperator():
			gs.Status = GroupNeedsOperator
		case groups[i].Status != "ready":
			gs.Status = GroupNotReady
		default:
			anyReady = true
		}
		st.Groups[g.Name] = gs
	}
	if !anyReady {
		st.Status = "not ready"
	}
	return st
}

// Handler routes the probe and metrics paths. live reports liveness.
func Handler(live func() error, checks []Check, metrics http.Handler) http.Handler {
	return HandlerFor(live, Readiness{Checks: checks}, metrics)
}

// HandlerFor is Handler with the readiness of groups.
func HandlerFor(live func() error, ready Readiness, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		st := Status{Status: "ok", Checks: map[string]string{"loop": "ok"}}
		if err := live(); err != nil {
			st = Status{Status: "failing", Checks: map[string]string{"loop": err.Error()}}
		}
		write(w, st)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		write(w, ready.Run(r.Context()))
	})
	mux.Handle("GET /metrics", metrics)
	// No request here has a body worth reading.
	return http.MaxBytesHandler(mux, 4<<10)
}

// Run runs checks concurrently and returns their combined status.
func Run(ctx context.Context, checks []Check) Status {
	st := Status{Status: "ready", Checks: make(map[string]string, len(checks))}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, c := range checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			state := "ok"
			if err := c.Func(ctx); err != nil {
				state = err.Error()
				if errors.Is(err, context.DeadlineExceeded) {
					state = "timeout"
				}
			}
			mu.Lock()
			defer mu.Unlock()
			st.Checks[c.Name] = state
			if state != "ok" {
				st.Status = "not ready"
			}
		})
	}
	wg.Wait()
	return st
}

// Watch runs checks every interval until ctx ends and reports whether all
// passed, so that readiness can be exported as a metric and alerted on.
func Watch(ctx context.Context, checks []Check, interval time.Duration, report func(ready bool)) {
	WatchReadiness(ctx, Readiness{Checks: checks}, interval, func(st Status) { report(st.Status == "ready") })
}

// WatchReadiness runs r every interval until ctx ends and reports the
// status, the groups' too.
func WatchReadiness(ctx context.Context, r Readiness, interval time.Duration, report func(Status)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		report(r.Run(ctx))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func write(w http.ResponseWriter, st Status) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if st.Status != "ok" && st.Status != "ready" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(st)
}

// Server is the HTTP server for Handler.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
	once sync.Once
}

// Listen binds addr now, so that a port in use fails start-up, and returns
// a server ready to Start.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		ln:   ln,
		done: make(chan error, 1),
	}, nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Start serves in the background.
func (s *Server) Start() {
	go func() {
		err := s.srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
}

// Stop shuts the server down gracefully within ctx, then closes it. It is
// safe to call twice or without Start.
func (s *Server) Stop(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		err = s.srv.Shutdown(ctx)
		if err != nil {
			err = errors.Join(err, s.srv.Close())
		}
		_ = s.ln.Close()
	})
	return err
}
