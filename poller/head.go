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

	// The canonical burns above the cursor, range after range, each
	// continuing the one before (the first continues the cursor's block).
	var burns []chain.Burn
	prev := cur.Hash
	// Nothing read here is credited: no receipts, no quorum.
	rctx := chain.CreditsNothing(ctx)
	for next := from; next <= to; {
		r, err := w.node.BurnRange(rctx, w.cfg.Contracts, uint64(next), uint64(to))
		if err != nil {
			return HeadTotals{}, fmt.Errorf("fetching burns of blocks [%d, %d] above the target: %w", next, to, err)
		}
		if err := checkSpan(r, next, to); err != nil {
			return HeadTotals{}, err
		}
		if err := checkContinues(r, prev); err != nil {
			// Above the cursor this is the head moving while we read,
			// or, at the cursor, a reorg the ledger's next poll
			// judges: either way nothing is written now.
			return HeadTotals{}, err
		}
		burns = append(burns, r.Burns...)
		prev = hashHex(r.To.Hash)
		next = int64(r.To.Number) + 1
	}
	ps, err := toPayments(w.cfg.ChainID, burns)
	if err != nil {
		return HeadTotals{}, err
	}

	if err := t.tx.LockWriters(ctx, w.cfg.ChainID, w.contracts()); err != nil {
		if errors.Is(err, payments.ErrLockTimeout) {
			// A backfill of the contract is recording: the next pass
			// will do.
			return HeadTotals{}, errHeadSkipped
		}
		return HeadTotals{}, err
	}
	t.writing = true
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
	want := make(map[string]payments.Payment, len(ps))
	for _, p := range ps {
		if _, done := recorded[payments.KeyOf(p.TxHash, p.LogIndex)]; !done {
			want[payments.KeyOf(p.TxHash, p.LogIndex)] = p
		}
	}
	var drop, put []payments.Payment
	kept := map[string]bool{}
	for _, r := range rows {
		key := payments.KeyOf(r.TxHash, r.LogIndex)
		if hash, done := recorded[key]; done {
			// Recorded meanwhile by another writer: it leaves, retracted
			// only if it was seen elsewhere than where it was recorded.
			drop = append(drop, r.Payment)
			if hash != r.BlockHash {
				t.events = append(t.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
			}
			continue
		}
		if r.BlockNumber > to {
			// Beyond this pass's window, or above a head that dropped
			// (a node may briefly report the common block during a
			// reorg): what the node did not show is not judged. The
			// row stays until a pass sees its height, or the ledger
			// records it.
			kept[key] = true
			continue
		}
		p, onChain := want[key]
		switch {
		case onChain && p.BlockHash == r.BlockHash:
			kept[key] = true
		case onChain:
			// Re-included in another block: the old position is
			// retracted, the new one seen (below).
			t.events = append(t.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
		default:
			drop = append(drop, r.Payment)
			t.events = append(t.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
		}
	}
	for _, p := range ps {
		key := payments.KeyOf(p.TxHash, p.LogIndex)
		if _, ok := want[key]; !ok || kept[key] {
			continue
		}
		put = append(put, p)
		t.events = append(t.events, payments.EventFor(payments.KindSeen, p, 0))
	}
	if err := t.tx.DropPending(ctx, drop); err != nil {
		return HeadTotals{}, err
	}
	if err := t.tx.PutPending(ctx, put); err != nil {
		return HeadTotals{}, err
	}
	if err := t.tx.SetHead(ctx, w.cfg.ChainID, int64(head.Number), hashHex(head.Hash)); err != nil {
		return HeadTotals{}, err
	}
	t.used = true
	totals, err := t.Commit(ctx)
	if err != nil {
		return HeadTotals{}, err
	}
	res.Seen, res.Retracted = totals.Events[payments.KindSeen], totals.Events[payments.KindRetracted]
	res.Pending = len(kept) + len(put)
	return res, nil
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
