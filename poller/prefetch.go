package poller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
)

// Window bounds of the ranges a range transaction has in flight.
const (
	minWindow = 2 // the range being recorded and the next one
	maxWindow = 8
)

// prefetcher reads the burn ranges after a cursor ahead of the writer and
// hands them over in chain order. Up to a window of ranges is in flight:
// two (the one being recorded and the next) while recording takes as long
// as fetching, as on a dense chain; up to eight while a round trip to the
// node takes many times longer than recording what it returned, as on a
// sparse chain behind a distant provider, so that the round trips overlap
// instead of queueing. Each range is planned at the node's current range
// size (Node.Span); a reply that ends short of its plan (a provider's limit
// learned meanwhile) drops the plans after it, and the blocks after it are
// planned again at the size learned, so the ranges handed over are
// contiguous. The writer still checks that each continues the one before.
type prefetcher struct {
	src       rangeSource
	contracts []common.Address
	maxSpan   uint64          // the most blocks a range may ask for
	memory    *atomic.Int32   // where the window is kept for the next read; nil: nowhere
	ctx       context.Context //nolint:containedctx // the fetches' own, which outlive a transaction (ranges in flight are the next one's)
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	next, to  int64     // the first block not planned yet, and the last
	deadline  time.Time // no range is planned after it
	queue     []*planned
	window    int
	fetchTook time.Duration // of the last range handed over
}

// planned is one range in flight.
type planned struct {
	from, to int64
	cancel   context.CancelFunc
	done     chan struct{}
	r        chain.Range
	err      error
	took     time.Duration
}

// rangeSource is what reading ranges needs of the node: *chain.Endpoints
// is the real one.
type rangeSource interface {
	BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (chain.Range, error)
	// Span is how many blocks the next range should ask for.
	Span() uint64
}

// newPrefetcher plans the ranges of blocks [from, to] of contracts under
// ctx, none after deadline (zero: no deadline), each at most maxSpan
// blocks; it starts with the window memory holds and keeps the last one
// there. Stop must be called.
func newPrefetcher(ctx context.Context, src rangeSource, contracts []common.Address, maxSpan uint64, memory *atomic.Int32,
	from, to int64, deadline time.Time) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	window := minWindow
	if memory != nil {
		window = min(maxWindow, max(minWindow, int(memory.Load())))
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	return &prefetcher{src: src, contracts: contracts, maxSpan: maxSpan, memory: memory, ctx: ctx, cancel: cancel,
		next: from, to: to, deadline: deadline, window: window}
}

// Ready says the next range has arrived whole: past the deadline, a range
// already fetched is still recorded rather than thrown away. A failed fetch
// is not ready: the transaction commits what it recorded, and the next one
// asks again.
func (p *prefetcher) Ready() bool {
	if len(p.queue) == 0 {
		return false
	}
	select {
	case <-p.queue[0].done:
		return p.queue[0].err == nil
	default:
		return false
	}
}

// Stop cancels the ranges still in flight and waits for them. Cancelling
// is ours, never the node's fault: it is not counted against the endpoint.
func (p *prefetcher) Stop() {
	p.cancel()
	p.wg.Wait()
}

// Next returns the next range in chain order, which starts where the last
// one ended. Before it returns, the ranges after it are on their way: up to
// the window less one, fetched while the caller records this one.
func (p *prefetcher) Next(ctx context.Context) (chain.Range, error) {
	if len(p.queue) == 0 {
		if p.next > p.to {
			return chain.Range{}, fmt.Errorf("no range left to read after block %d", p.to)
		}
		p.plan()
	}
	head := p.queue[0]
	select {
	case <-head.done:
	case <-p.ctx.Done():
		return chain.Range{}, p.ctx.Err()
	case <-ctx.Done():
		return chain.Range{}, ctx.Err()
	}
	p.queue = p.queue[1:]
	if head.err != nil {
		return chain.Range{}, fmt.Errorf("fetching burns of blocks [%d, %d]: %w", head.from, head.to, head.err)
	}
	if err := checkSpan(head.r, head.from, head.to); err != nil {
		return chain.Range{}, err
	}
	if _, end := ends(head.r); end < head.to {
		// Short of the plan: the node learned a smaller range (a
		// provider's limit), and the ranges planned after this one were
		// planned too large as well. They are dropped and the blocks
		// after this range planned again at the size learned.
		for _, pl := range p.queue {
			pl.cancel()
		}
		p.queue, p.next = nil, end+1
		if p.next <= p.to {
			p.plan()
		}
	}
	p.fetchTook = head.took
	for len(p.queue) < p.window-1 && p.next <= p.to && time.Now().Before(p.deadline) {
		p.plan()
	}
	return head.r, nil
}

// extend plans up to block to (when further than planned) and sets the
// deadline after which no range is planned (zero: none): a read kept from
// one transaction to the next goes on with the next one's target and
// budget.
func (p *prefetcher) extend(to int64, deadline time.Time) {
	p.to = max(p.to, to)
	if deadline.IsZero() {
		deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	p.deadline = deadline
}

// plan puts the next range, at the node's current range size, in flight.
func (p *prefetcher) plan() {
	span := max(1, min(p.src.Span(), p.maxSpan))
	_, to, _ := NextRange(p.next-1, p.to, span)
	p.queue = append(p.queue, p.launch(p.next, to))
	p.next = to + 1
}

// sparseLogs is the most logs a range may carry for the window to grow
// past two: a window of dense ranges would hold that many replies in
// memory at once.
const sparseLogs = 500

// Recorded tells how long recording the last range, of logs logs, took:
// the window grows to cover the round trip with ranges in flight while
// ranges are sparse, and is two when recording is the slower part or the
// ranges are dense.
func (p *prefetcher) Recorded(took time.Duration, logs int) {
	w := maxWindow
	switch {
	case logs > sparseLogs:
		w = minWindow
	case took > 0:
		w = 1 + int(p.fetchTook/took)
	}
	p.window = min(maxWindow, max(minWindow, w))
	if p.memory != nil {
		p.memory.Store(int32(p.window)) // the next transaction starts with it
	}
}

// launch fetches the burns of blocks [from, to] in the background.
func (p *prefetcher) launch(from, to int64) *planned {
	ctx, cancel := context.WithCancel(p.ctx)
	pl := &planned{from: from, to: to, cancel: cancel, done: make(chan struct{})}
	p.wg.Go(func() {
		defer close(pl.done)
		defer cancel()
		start := time.Now()
		pl.r, pl.err = p.src.BurnRange(ctx, p.contracts, nodeBlock(from), nodeBlock(to))
		pl.took = time.Since(start)
	})
	return pl
}
