package poller

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// readSpec is one read of blocks [from, to]: what to read, and what the
// ledger holds that the chain read must agree with.
type readSpec struct {
	contracts []common.Address
	from, to  int64
	// ledger is the block the ledger vouches for, with its hash (a cursor):
	// the chain read must hold it. A read starts right after it (the
	// live loop, head tracking) or ends on it (a rescan). An empty Hash
	// vouches for nothing (a verify, a cursor seeded without a hash).
	ledger payments.Cursor
	// after is the hash of block from-1 as the node gave it a moment ago
	// in the same transaction ("" when none was read): the first range
	// must continue it.
	after string
	// deadline: no range is planned after it (zero: none).
	deadline time.Time
}

// rangeReader reads the burn ranges of a readSpec in chain order, with the
// ranges after the current one in flight (see prefetcher), and checks each
// one before handing it over, by one continuity rule for every reader (the
// live loop and its catch-up, backfills, rescans, head tracking, verify):
//
//   - the chain the ranges describe holds the block the ledger vouches for
//     at the hash the ledger holds: the first range's parent when the read
//     starts right after that block, the last block of a range that ends
//     on it. Otherwise the chain no longer holds what was committed: a
//     *ViolationError.
//   - each range continues the one before it (and the first one continues
//     spec.after): otherwise the node changed its chain between two of
//     this transaction's reads, a bad reply, retried.
//
// What a caller does with a range (record it, compare it, keep it pending)
// is its own.
type rangeReader struct {
	p      *prefetcher
	spec   readSpec
	prev   string // the hash of the block before the next range, "" unknown
	next   int64  // the first block of the next range
	ledger payments.Cursor
}

// newRangeReader starts reading s from src, ranges of at most maxSpan
// blocks; memory keeps the window of ranges in flight from one read to the
// next (nil: none). Stop must be called.
func newRangeReader(ctx context.Context, src rangeSource, maxSpan uint64, memory *atomic.Int32, s readSpec) *rangeReader {
	return &rangeReader{
		p:    newPrefetcher(ctx, src, s.contracts, maxSpan, memory, s.from, s.to, s.deadline),
		spec: s, prev: s.after, next: s.from, ledger: s.ledger,
	}
}

// read starts a writer's read of s, sized and windowed as the writer's
// reads are.
func (w *Writer) read(ctx context.Context, s readSpec) *rangeReader {
	return newRangeReader(ctx, w.node, w.cfg.MaxBlockRange, &w.window, s)
}

// readAhead is the read of s for a transaction that advances a cursor: the
// read the writer's last transaction on that cursor kept (see keepAhead),
// when s takes it up, else a new one. Its fetches outlive the transaction,
// each within the node's own request timeout, so that the ranges in flight
// when a transaction commits are the next one's, not fetched again.
func (w *Writer) readAhead(ctx context.Context, s readSpec) *rangeReader {
	w.aheadMu.Lock()
	kept := w.ahead
	w.ahead = nil
	w.aheadMu.Unlock()
	if kept != nil {
		if kept.resume(s) {
			return kept
		}
		kept.Stop()
	}
	return w.read(context.WithoutCancel(ctx), s)
}

// keepAhead keeps r for the writer's next transaction on the same cursor
// (the one this one committed), or stops it when it has nothing left.
func (w *Writer) keepAhead(r *rangeReader) {
	if r.Done() {
		r.Stop()
		return
	}
	w.aheadMu.Lock()
	old := w.ahead
	w.ahead = r
	w.aheadMu.Unlock()
	if old != nil {
		old.Stop()
	}
}

// ForgetAhead stops the read kept for the next transaction, if any: the
// writer's loop or backfill is over.
func (w *Writer) ForgetAhead() {
	w.aheadMu.Lock()
	kept := w.ahead
	w.ahead = nil
	w.aheadMu.Unlock()
	if kept != nil {
		kept.Stop()
	}
}

// Done says every block of the read has been handed over.
func (r *rangeReader) Done() bool { return r.next > r.spec.to }

// Ready says the next range has arrived whole (see prefetcher.Ready).
func (r *rangeReader) Ready() bool { return r.p.Ready() }

// Recorded tells how long recording the last range, of logs logs, took
// (see prefetcher.Recorded).
func (r *rangeReader) Recorded(took time.Duration, logs int) { r.p.Recorded(took, logs) }

// Stop cancels the ranges still in flight and waits for them.
func (r *rangeReader) Stop() { r.p.Stop() }

// Next returns the next range, checked; it starts where the last one
// ended. It waits for the range within ctx.
func (r *rangeReader) Next(ctx context.Context) (chain.Range, error) {
	rg, err := r.p.Next(ctx)
	if err != nil {
		return chain.Range{}, err
	}
	if err := continues(r.ledger, r.prev, r.next, rg); err != nil {
		return chain.Range{}, err
	}
	_, last := ends(rg)
	r.prev, r.next = hashHex(rg.To.Hash), last+1
	return rg, nil
}

// continues is the one continuity rule of every read, for rg, a range
// starting at block next: the chain it describes holds the block the
// ledger vouches for (led) at the hash the ledger holds, when rg starts
// right after that block or ends on it (otherwise a *ViolationError); and
// rg continues prev, the hash of block next-1 as the node gave it a moment
// ago ("" when none was read; otherwise a bad reply).
func continues(led payments.Cursor, prev string, next int64, rg chain.Range) error {
	first, last := ends(rg)
	parent := hashHex(rg.From.ParentHash)
	switch {
	case led.Hash != "" && led.Block == next-1 && parent != led.Hash:
		return &ViolationError{Cursor: led, Block: led.Block, Committed: led.Hash, ChainHash: parent, SeenAt: first}
	case prev != "" && parent != prev:
		return fmt.Errorf("%w: block %d's parent is %s, but block %d was %s a moment ago",
			chain.ErrBadReply, rg.From.Number, parent, next-1, prev)
	case led.Hash != "" && led.Block == last && hashHex(rg.To.Hash) != led.Hash:
		return &ViolationError{Cursor: led, Block: led.Block, Committed: led.Hash, ChainHash: hashHex(rg.To.Hash), SeenAt: last}
	}
	return nil
}

// End is the hash of the last block handed over (spec.after before the
// first).
func (r *rangeReader) End() string { return r.prev }

// resume takes up s where this read stands, when s starts at the read's
// next block right after what the ledger vouches for, with the same
// contracts: the ranges already in flight are the next transaction's, and
// the read goes on to s's target within s's deadline. The reader's rule
// holds as for a new read: the next range must continue the ledger's block.
func (r *rangeReader) resume(s readSpec) bool {
	if s.from != r.next || s.ledger.Block != r.next-1 || s.ledger.Hash == "" || s.ledger.Hash != r.prev ||
		!slices.Equal(s.contracts, r.spec.contracts) {
		return false
	}
	r.spec.to, r.spec.deadline, r.ledger = max(r.spec.to, s.to), s.deadline, s.ledger
	r.p.extend(s.to, s.deadline)
	return true
}
