package chain

import (
	"context"
	"log/slog"
)

// failover is one call asked of the endpoints of a set in turn.
type failover[T any] struct {
	// call asks one endpoint.
	call func(ctx context.Context, ep *endpoint) (T, error)
	// take receives each answer and says whether it ends the asking.
	take func(ep *endpoint, v T) (done bool)
	// askCooling, when set, says whether an endpoint cooling down after a
	// failure is still worth asking, once every ready one was; nil: it is.
	askCooling func() bool
}

// run asks the endpoints as pick orders them (the serving one unless it is
// cooling down, then the others, cooling ones last), each at most once,
// until take says done. A failed call cools its endpoint down (fail) and
// the next is asked. When the caller's ctx ends, run returns its error at
// once: no endpoint's fault. It returns nil once take said done, else the
// last error seen (pick's, when no endpoint was left to ask at all).
func (f failover[T]) run(ctx context.Context, e *Endpoints) error {
	var (
		tried   []*endpoint
		lastErr error
	)
	for {
		ep, ready, err := e.pick(ctx, tried)
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			return lastErr
		}
		if !ready && f.askCooling != nil && !f.askCooling() {
			return lastErr
		}
		tried = append(tried, ep)
		v, err := f.call(ctx, ep)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			e.fail(ctx, ep, err)
			lastErr = err
			continue
		}
		if f.take(ep, v) {
			return nil
		}
	}
}

// firstAnswer asks the endpoints for call until one answers.
func firstAnswer[T any](ctx context.Context, e *Endpoints, call func(context.Context, *endpoint) (T, error)) (T, error) {
	var out T
	err := failover[T]{
		call: call,
		take: func(_ *endpoint, v T) bool { out = v; return true },
	}.run(ctx, e)
	return out, err
}

// Target asks the serving endpoint for the finality target. An endpoint
// behind the highest target seen is lagging: another endpoint takes over if
// one is ahead; if none is, Target returns what the best of them can prove.
// An endpoint cooling down after a failure is asked only when no ready one
// answered: a slightly lagging healthy endpoint beats it.
func (e *Endpoints) Target(ctx context.Context) (Target, error) {
	if e.cfg.Quorum > 1 {
		return e.quorumTarget(ctx)
	}
	var (
		best  *endpoint
		bestT int64 = -2
		found *Target
	)
	err := failover[int64]{
		call: func(ctx context.Context, ep *endpoint) (int64, error) {
			return ep.c.Target(ctx, e.cfg.Finality, e.cfg.Confirmations)
		},
		take: func(ep *endpoint, t int64) bool {
			e.mu.Lock()
			highest := e.highest
			e.mu.Unlock()
			if t >= highest {
				served := e.serve(ep, t)
				found = &served
				return true
			}
			e.obs.Lagging(ep.c.String(), highest-t)
			e.log.Warn("endpoint is behind the highest target seen", slog.String("endpoint", ep.c.String()),
				slog.Int64("target", t), slog.Int64("highest", highest))
			if t > bestT {
				best, bestT = ep, t
			}
			return false
		},
		askCooling: func() bool { return best == nil },
	}.run(ctx, e)
	switch {
	case found != nil:
		return *found, nil
	case ctx.Err() != nil:
		return Target{}, err // the caller gave up: no endpoint's fault
	case best != nil:
		return e.serve(best, bestT), nil
	}
	return Target{}, err
}

// serve makes ep the serving endpoint with target t.
func (e *Endpoints) serve(ep *endpoint, t int64) Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.highest = max(e.highest, t)
	ep.health.served()
	e.activate(ep)
	return Target{Block: t, Highest: e.highest}
}

// Header returns the canonical header of block n from a usable endpoint,
// chosen as Target chooses; when one fails, the next is asked.
func (e *Endpoints) Header(ctx context.Context, n uint64) (Header, error) {
	hs, err := e.Headers(ctx, []uint64{n})
	if err != nil {
		return Header{}, err
	}
	return hs[n], nil
}

// Headers returns the canonical headers of blocks ns from a usable
// endpoint, asked in batches, failing over to the next endpoint within the
// call. A block the node does not have fails the call (ErrNotFound). With
// a quorum, Quorum endpoints must give the same hashes (quorumHeaders).
func (e *Endpoints) Headers(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	if e.cfg.Quorum > 1 {
		return e.quorumHeaders(ctx, ns)
	}
	return firstAnswer(ctx, e, func(ctx context.Context, ep *endpoint) (map[uint64]Header, error) {
		return ep.c.HeadersByNumber(ctx, ns)
	})
}

// Head returns the header of the serving endpoint's head (latest), failing
// over like Headers.
func (e *Endpoints) Head(ctx context.Context) (Header, error) {
	return firstAnswer(ctx, e, func(ctx context.Context, ep *endpoint) (Header, error) {
		return ep.c.HeaderByTag(ctx, "latest")
	})
}
