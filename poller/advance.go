package poller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/burnpoller/burnpoller/chain"
)

// Advance records the blocks after the cursor up to block to: range after
// range, in chain order, as the reader hands them over, then moves the
// cursor to the end of the last range recorded. It goes on to the next
// range only while that range has arrived whole and budget lasts: once it
// holds the contracts' writer lock (at its first record) it never waits on
// the node, so another writer of the contracts (a backfill beside the live
// loop) waits at most for a recording, never for a round trip. The ranges
// still in flight are the next transaction's (Writer.readAhead). The
// reader's continuity rule holds: the first range continues the cursor's
// block, else a *ViolationError and nothing is written.
func (t *RangeTx) Advance(ctx context.Context, to int64, budget time.Duration) (Totals, error) {
	if err := t.use(); err != nil {
		return Totals{}, err
	}
	cur := t.cur
	if to <= cur.Block {
		return t.totals, nil
	}
	if !t.w.hinted.Load() {
		t.hintDensity(ctx)
	}
	deadline := time.Now().Add(budget)
	ranges := t.w.readAhead(ctx, readSpec{contracts: t.w.cfg.Contracts, from: cur.Block + 1, to: to, ledger: cur, deadline: deadline})
	t.reading = ranges
	var end int64
	for {
		r, err := ranges.Next(ctx)
		if err != nil {
			return Totals{}, err
		}
		start := time.Now()
		got, err := t.record(ctx, r, t.w.contracts())
		if err != nil {
			return Totals{}, err
		}
		ranges.Recorded(time.Since(start), got.logs)
		t.totals.Logs += got.logs
		t.totals.Rejected += got.rejected
		t.totals.Inserted += got.inserted
		t.totals.Duplicates += got.duplicates
		_, end = ends(r)
		if end >= to || !ranges.Ready() || !time.Now().Before(deadline) {
			break
		}
	}
	if err := t.tx.MoveCursor(ctx, cur.ID, cur.Block, end, ranges.End()); err != nil {
		return Totals{}, err
	}
	t.totals.To = end
	return t.totals, nil
}

// checkSpan returns a bad reply unless r starts at block from and ends
// within [from, maxTo].
func checkSpan(r chain.Range, from, maxTo int64) error {
	if first, last := ends(r); first != from || last < from || last > maxTo {
		return fmt.Errorf("%w: asked for blocks from %d to at most %d, got [%d, %d]", chain.ErrBadReply, from, maxTo, first, last)
	}
	return nil
}

// densitySample is how many committed blocks tell the log density.
const densitySample = 256

// hintDensity tells the node how dense the ledger's recent blocks are, so
// that a writer taking over sizes its first range right.
func (t *RangeTx) hintDensity(ctx context.Context) {
	t.w.hinted.Store(true)
	cur := t.cur
	from := max(cur.Block-densitySample+1, 0)
	if cur.Block < from {
		return
	}
	n, err := t.tx.CountPayments(ctx, t.w.cfg.ChainID, t.w.contracts(), from, cur.Block)
	if err != nil {
		t.w.log.Debug("reading the ledger's log density", slog.Any("err", err))
		return
	}
	t.w.node.HintDensity(nodeBlock(cur.Block-from+1), n)
}

// NextRange returns the next block range after cursor, at most maxRange
// blocks and not beyond target, or ok=false when the cursor has reached the
// target.
func NextRange(cursor, target int64, maxRange uint64) (from, to int64, ok bool) {
	if cursor >= target || maxRange == 0 {
		return 0, 0, false
	}
	from = cursor + 1
	to = target
	if uint64(target-from) >= maxRange {
		to = from + int64(maxRange) - 1
	}
	return from, to, true
}
