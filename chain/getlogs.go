package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// BurnRange fetches the burns of contracts from block from up to at most
// maxTo from a usable endpoint, chosen as Target chooses: the serving one
// unless it is cooling down after a failure, else the next; never one on
// another chain, and each one's chain id checked before its first use. The
// returned Range may end before maxTo: it stays within that endpoint's
// learned range limit. A "range too large" reply shrinks the range to the
// provider's suggestion when smaller, else halves it, and tries again at
// once; the limit learned grows back slowly after successes. A refusal at a
// single block gives ErrRangeAtOneBlock. An endpoint that says it no longer
// serves the blocks (pruned history) is passed over for them and the next is
// asked at once; when none serves them, the error wraps
// ErrHistoryUnavailable. Any other failure is returned and hands over: the
// next call goes to the next endpoint. The range is not asked elsewhere
// within the call: the caller retries it, after asking for a target again,
// which the endpoint taking over then proves. With a quorum, k endpoints
// must give the same range (see quorumRange).
func (e *Endpoints) BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (Range, error) {
	if from > maxTo {
		return Range{}, fmt.Errorf("empty range [%d, %d]", from, maxTo)
	}
	if e.cfg.Quorum > 1 && !creditsNothing(ctx) {
		return e.quorumRange(ctx, contracts, from, maxTo)
	}
	var (
		tried  []*endpoint
		pruned = error(ErrHistoryPruned)
	)
	for {
		ep, _, err := e.pick(ctx, append(tried, e.prunedFor(from)...))
		if err != nil {
			if e.anyPrunedFor(from) {
				return Range{}, e.historyGap(from, pruned)
			}
			return Range{}, err
		}
		r, err := e.burnRange(ctx, ep, contracts, from, maxTo)
		if ClassOf(err) == ClassPruned {
			tried, pruned = append(tried, ep), err
			continue
		}
		if err != nil {
			return Range{}, err
		}
		e.mu.Lock()
		e.activate(ep)
		e.hasGap = false
		e.mu.Unlock()
		return r, nil
	}
}

// prunedFor returns the endpoints that refused block from as pruned history.
func (e *Endpoints) prunedFor(from uint64) []*endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*endpoint
	for _, ep := range e.eps {
		if ep.health.prunedFor(from) {
			out = append(out, ep)
		}
	}
	return out
}

func (e *Endpoints) anyPrunedFor(from uint64) bool { return len(e.prunedFor(from)) > 0 }

// historyGap is the error when no endpoint serves block from; it is logged
// once per block and readiness reports it.
func (e *Endpoints) historyGap(from uint64, last error) error {
	e.mu.Lock()
	first := !e.hasGap || e.gap != from
	e.gap, e.hasGap = from, true
	e.mu.Unlock()
	err := &Error{Class: ClassPruned, Endpoint: e.String(), Method: "eth_getLogs",
		Err: fmt.Errorf("block %d: %w (every endpoint of RPC_URL that was asked has pruned it; add an archive endpoint to RPC_URL): %w", from, ErrHistoryUnavailable, last)}
	if first {
		e.log.Error("no endpoint serves this block's history any more; the cursor cannot advance until RPC_URL lists an archive endpoint",
			slog.Uint64("block", from), slog.Any("err", last))
	}
	return err
}

func (e *Endpoints) burnRange(ctx context.Context, ep *endpoint, contracts []common.Address, from, maxTo uint64) (Range, error) {
	e.mu.Lock()
	limit := e.sizer.span(&ep.size)
	e.mu.Unlock()
	to := maxTo
	if to-from+1 > limit {
		to = from + limit - 1
	}
	for {
		start := time.Now()
		r, err := ep.c.BurnRange(ctx, contracts, from, to)
		if err == nil {
			logs := len(r.Burns) + len(r.Rejected)
			e.succeed(ep, to-from+1, densitySpan(from, to, firstLog(r), logs), logs, time.Since(start))
			return r, nil
		}
		var rpcErr *Error
		if errors.As(err, &rpcErr) && rpcErr.Class == ClassPruned && ctx.Err() == nil {
			// The endpoint is fine for newer blocks: no cool-down.
			e.mu.Lock()
			ep.health.pruned(to)
			e.mu.Unlock()
			e.log.Warn("endpoint no longer serves these blocks (pruned history); asking another", slog.String("endpoint", ep.c.String()),
				slog.Uint64("from", from), slog.Uint64("to", to), slog.Any("err", err))
			return Range{}, err
		}
		if !errors.As(err, &rpcErr) || rpcErr.Class != ClassRangeLimit {
			e.tooSlow(ctx, ep, to-from+1, err)
			e.fail(ctx, ep, err)
			return Range{}, err
		}
		span := to - from + 1
		if errors.Is(err, ErrResponseTooLarge) && span > 1 {
			// Too many logs to read safely: a density problem, not the
			// provider's limit. The cut reply shows how dense the blocks
			// are, so the next range is the right size at once.
			var cut cutReply
			if rpcErr.cut != nil {
				cut = *rpcErr.cut
			}
			e.mu.Lock()
			next := e.sizer.tooLarge(span, from, cut)
			e.mu.Unlock()
			e.log.Warn("reply too large; narrowing the range", slog.Uint64("from", from), slog.Uint64("to", to), slog.Uint64("blocks", next))
			to = from + next - 1
			continue
		}
		if span == 1 {
			err = fmt.Errorf("block %d on %s: %w: %w", from, ep.c, ErrRangeAtOneBlock, err)
			e.fail(ctx, ep, err) // another endpoint, if any, takes over
			e.mu.Lock()
			ep.health.stuck = true
			e.mu.Unlock()
			return Range{}, err
		}
		e.mu.Lock()
		next := e.sizer.refused(&ep.size, from, to, rpcErr.Limit)
		e.mu.Unlock()
		e.obs.RangeLimit(ep.c.String(), next)
		e.log.Warn("provider refused the eth_getLogs range; narrowing it", slog.String("endpoint", ep.c.String()),
			slog.Uint64("from", from), slog.Uint64("to", to), slog.Uint64("new_limit", next), slog.Any("err", err))
		to = from + next - 1
	}
}
