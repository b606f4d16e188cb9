package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Head tracking results, the values of burnpoller_head_tracking_total's
// result label.
const (
	headOK      = "ok"
	headError   = "error"
	headSkipped = "skipped"
)

// errHeadSkipped says a head tracking pass did not run: the cursor is
// behind the target (the ledger comes first) or another writer holds it.
var errHeadSkipped = errors.New("head tracking skipped")

// HeadTotals is what a head tracking pass did.
type HeadTotals struct {
	// From and To are the blocks read above the cursor (To < From when the
	// head is at the cursor).
	From, To int64
	// Head is the head block the pass read.
	Head chain.Header
	// Seen and Retracted count the events recorded; Pending is how many
	// burns pending_payments holds for the contract afterwards.
	Seen, Retracted, Pending int
}

// TrackHead makes pending_payments hold, for blocks above cursor id up to
// the head (at most maxBlocks of them), exactly the burns the canonical
// chain holds there, and records seen and retracted events for the
// difference, in one range transaction under the cursor's lock. It runs
// only while the cursor is at the finality target; otherwise, or when the
// lock is held elsewhere, it returns errHeadSkipped. It never moves the
// cursor or writes payments: a failure leaves the ledger as it was.
func (w *Writer) TrackHead(stop, ctx context.Context, id string, maxBlocks uint64) (HeadTotals, error) {
	t, err := w.Begin(stop, ctx, id)
	if errors.Is(err, payments.ErrLockTimeout) {
		return HeadTotals{}, errHeadSkipped
	}
	if err != nil {
		return HeadTotals{}, err
	}
	defer t.Rollback()
	if err := t.use(); err != nil {
		return HeadTotals{}, err
	}
	cur := t.cur
	target, err := w.node.Target(ctx)
	if err != nil {
		return HeadTotals{}, fmt.Errorf("reading the target: %w", err)
	}
	if cur.Block < target.Block {
		return HeadTotals{}, errHeadSkipped
	}
	head, err := w.node.Head(ctx)
	if err != nil {
		return HeadTotals{}, fmt.Errorf("reading the head: %w", err)
	}
	if int64(head.Number) < cur.Block {
		// A node behind what the ledger holds (lagging, or in the
		// middle of a reorg) says nothing about the blocks above.
		return HeadTotals{}, errHeadSkipped
	}
	from := cur.Block + 1
	to := min(int64(head.Number), cur.Block+int64(maxBlocks))
	res := HeadTotals{From: from, To: to, Head: head}

	// The canonical burns above the cursor, read as every writer reads
	// (the first range continues the cursor's block). Nothing read here is
	// credited: no receipts, no quorum.
	var burns []chain.Burn
	if from <= to {
		ranges := w.read(chain.CreditsNothing(ctx), readSpec{contracts: w.cfg.Contracts, from: from, to: to, ledger: cur})
		defer ranges.Stop()
		for !ranges.Done() {
			r, err := ranges.Next()
			if err != nil {
				// Above the cursor this is the head moving while we
				// read; at the cursor, the ledger's next poll judges.
				// Either way nothing is written now.
				return HeadTotals{}, fmt.Errorf("reading burns above the target: %w", err)
			}
			burns = append(burns, r.Burns...)
		}
	}
	ps, err := toPayments(w.cfg.ChainID, burns)
	if err != nil {
		return HeadTotals{}, err
	}

	if err := t.lockWriters(ctx); err != nil {
		if errors.Is(err, payments.ErrLockTimeout) {
			// A backfill of the contract is recording: the next pass
			// will do.
			return HeadTotals{}, errHeadSkipped
		}
		return HeadTotals{}, err
	}
	rows, err := t.tx.PendingOf(ctx, w.cfg.ChainID, w.contracts())
	if err != nil {
		return HeadTotals{}, err
	}
	// A burn another writer already recorded is not pending.
	all := make([]payments.Payment, 0, len(ps)+len(rows))
	all = append(all, ps...)
	for _, r := range rows {
		all = append(all, r.Payment)
	}
	recorded, err := t.tx.RecordedBlockHashes(ctx, w.cfg.ChainID, all)
	if err != nil {
		return HeadTotals{}, err
	}
	d := diffPending(cur.Block, to, rows, ps, recorded)
	t.addEvents(d.events...)
	if err := t.tx.DropPending(ctx, d.drop); err != nil {
		return HeadTotals{}, err
	}
	if err := t.tx.PutPending(ctx, d.put); err != nil {
		return HeadTotals{}, err
	}
	if err := t.tx.SetHead(ctx, w.cfg.ChainID, int64(head.Number), hashHex(head.Hash)); err != nil {
		return HeadTotals{}, err
	}
	totals, err := t.Commit(ctx)
	if err != nil {
		return HeadTotals{}, err
	}
	res.Seen, res.Retracted = totals.Events[payments.KindSeen], totals.Events[payments.KindRetracted]
	res.Pending = d.pending
	return res, nil
}

// pendingDiff is what a head tracking pass changes: the pending rows to
// remove and to put (a moved burn's new row replaces its old one), the
// events to record, in order, and how many rows are pending afterwards.
type pendingDiff struct {
	drop, put []payments.Payment
	events    []payments.Event
	pending   int
}

// diffPending makes the pending rows agree with the chain: rows are the
// pending rows, onChain the canonical burns of blocks (cursor, to], and
// recorded the block hash the ledger holds for those of both that are
// payments (by payments.KeyOf).
//
//   - A burn the ledger holds is not pending: its row goes, retracted only
//     if it was seen elsewhere than where it was recorded.
//   - A row at or below the cursor is the ledger's to settle (whatever
//     records its block: the loop, a backfill of blocks a reset skipped),
//     never judged by a window that starts above it.
//   - A row above to (beyond this pass's window, or above a head that
//     dropped) is kept: what the node did not show is not judged.
//   - A row whose burn the chain holds at the same block hash is kept; at
//     another, retracted where it was and seen where it is; nowhere,
//     retracted and removed.
//   - A burn on the chain that is neither recorded nor pending is put and
//     seen.
func diffPending(cursor, to int64, rows []payments.Pending, onChain []payments.Payment, recorded map[string]string) pendingDiff {
	var d pendingDiff
	want := make(map[string]payments.Payment, len(onChain))
	for _, p := range onChain {
		if _, done := recorded[payments.KeyOf(p.TxHash, p.LogIndex)]; !done {
			want[payments.KeyOf(p.TxHash, p.LogIndex)] = p
		}
	}
	kept := map[string]bool{}
	for _, r := range rows {
		key := payments.KeyOf(r.TxHash, r.LogIndex)
		if hash, done := recorded[key]; done {
			d.drop = append(d.drop, r.Payment)
			if hash != r.BlockHash {
				d.events = append(d.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
			}
			continue
		}
		p, onChain := want[key]
		switch {
		case r.BlockNumber > to:
			kept[key] = true
		case onChain && p.BlockHash == r.BlockHash:
			kept[key] = true
		case onChain:
			// Re-included in another block: the old position is
			// retracted, the new one seen (below).
			d.events = append(d.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
		case r.BlockNumber <= cursor:
			kept[key] = true
		default:
			d.drop = append(d.drop, r.Payment)
			d.events = append(d.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
		}
	}
	for _, p := range onChain {
		key := payments.KeyOf(p.TxHash, p.LogIndex)
		if _, ok := want[key]; !ok || kept[key] {
			continue
		}
		d.put = append(d.put, p)
		d.events = append(d.events, payments.EventFor(payments.KindSeen, p, 0))
	}
	d.pending = len(kept) + len(d.put)
	return d
}

// trackHead runs one head tracking pass after the ledger reached the
// target. Its failure is logged and counted, never returned: the ledger
// goes on, and readiness does not change.
func (l *Loop) trackHead(stop, hard context.Context) {
	ctx, cancel := context.WithTimeout(hard, l.w.cfg.TxTimeout)
	defer cancel()
	res, err := l.w.TrackHead(stop, ctx, l.cfg.CursorID, l.cfg.PendingMaxBlocks)
	switch {
	case errors.Is(err, errHeadSkipped), err != nil && stop.Err() != nil:
		l.metrics.headTracked(headSkipped, 0)
		return
	case err != nil:
		l.metrics.headTracked(headError, 0)
		l.log.Warn("head tracking failed; pending payments may be stale, the ledger goes on",
			slog.Any("err", err), slog.String("class", string(chain.ClassOf(err))))
		l.Signals.HeadFailed.Send(err)
		return
	}
	l.metrics.headTracked(headOK, res.Pending)
	if res.Seen > 0 || res.Retracted > 0 {
		l.log.Info("head tracked", slog.Int64("from", res.From), slog.Int64("to", res.To),
			slog.Uint64("head", res.Head.Number), slog.Int("seen", res.Seen), slog.Int("retracted", res.Retracted),
			slog.Int("pending", res.Pending))
	}
	l.Signals.HeadTracked.Send(res)
}
