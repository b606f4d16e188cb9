package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
	// From and To are the blocks read above the cursor (To < From when
	// nothing was to read).
	From, To int64
	// Head is the head block the pass read.
	Head chain.Header
	// Seen and Retracted count the events recorded; Pending is how many
	// burns pending_payments holds for the contract afterwards.
	Seen, Retracted, Pending int
	// Behind says the pass stopped short of the window's top: the next
	// pass goes on from To.
	Behind bool
}

// TrackHead runs one head tracking pass on cursor id: it reads the next
// range of the window above the cursor (up to the head, at most maxBlocks
// above the cursor) from where the group's last pass stood, makes
// pending_payments hold for those blocks exactly the burns the canonical
// chain holds there, records seen and retracted events for the difference
// and where it stands now, in one range transaction under the cursor's
// lock, and returns. A window wider than one range is read in bounded
// passes that each commit (HeadTotals.Behind), so a pass holds the cursor
// no longer than a ledger range does and the node is asked about each
// block of head movement once. A first block that no longer continues where
// the last pass stood (the chain reorganised above the cursor) makes the
// pass start again from the cursor. It runs only while the cursor is at the
// finality target; otherwise, or when the lock is held elsewhere, it
// returns errHeadSkipped. It never moves the cursor or writes payments: a
// failure leaves the ledger as it was.
func (w *Writer) TrackHead(stop, ctx context.Context, id string, maxBlocks int64) (HeadTotals, error) {
	return w.trackHead(stop, ctx, id, maxBlocks, nil, nil)
}

// trackHead is TrackHead; what the caller read a moment ago (the loop's
// poll, just before) stands for the pass's own reads: a target (one read
// of the finality tag serves the ledger and head tracking alike), and the
// head with the burns above the target from where the pass goes on (a
// look's). Nil reads them.
func (w *Writer) trackHead(stop, ctx context.Context, id string, maxBlocks int64, known *chain.Target, read *headRead) (HeadTotals, error) {
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
	target, err := w.targetOr(ctx, known)
	if err != nil {
		return HeadTotals{}, err
	}
	if cur.Block < target.Block {
		return HeadTotals{}, errHeadSkipped
	}
	var head chain.Header
	if read != nil {
		head = read.head
	} else if head, err = w.node.Head(ctx); err != nil {
		return HeadTotals{}, fmt.Errorf("reading the head: %w", err)
	}
	headBlock := ledgerBlock(head.Number)
	if headBlock < cur.Block {
		// A node behind what the ledger holds (lagging, or in the
		// middle of a reorg) says nothing about the blocks above.
		return HeadTotals{}, errHeadSkipped
	}
	top := min(headBlock, cur.Block+maxBlocks)
	scan, err := t.tx.HeadScan(ctx, id)
	if err != nil {
		return HeadTotals{}, err
	}
	from, after := headStart(cur, scan, head, top)
	span := ledgerBlock(max(1, min(w.node.Span(), w.cfg.MaxBlockRange)))
	to := min(top, from+span-1)
	res := HeadTotals{From: from, To: to, Head: head, Behind: to < top}

	ps, end, err := w.headStep(ctx, cur, from, to, after, read)
	if errors.Is(err, errHeadRestart) {
		return w.restartHead(t, ctx, id, cur, head)
	}
	if err != nil {
		return HeadTotals{}, err
	}

	if err := t.lockWriters(ctx); err != nil {
		if errors.Is(err, payments.ErrWritersBusy) {
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
	d := diffPending(from, to, rows, ps, recorded)
	t.addEvents(d.events...)
	if err := t.tx.DropPending(ctx, d.drop); err != nil {
		return HeadTotals{}, err
	}
	if err := t.putPending(ctx, d.put); err != nil {
		return HeadTotals{}, err
	}
	if from <= to {
		if err := t.tx.SetHeadScan(ctx, id, to, end); err != nil {
			return HeadTotals{}, err
		}
	}
	if err := t.tx.SetHead(ctx, w.cfg.ChainID, headBlock, hashHex(head.Hash)); err != nil {
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

// targetOr is known, or the target read from the node when known is nil.
func (w *Writer) targetOr(ctx context.Context, known *chain.Target) (chain.Target, error) {
	if known != nil {
		return *known, nil
	}
	target, err := w.node.Target(ctx)
	if err != nil {
		return chain.Target{}, fmt.Errorf("reading the target: %w", err)
	}
	return target, nil
}

// errHeadRestart says the chain no longer continues where the last head
// tracking pass stood: it reorganised above the cursor.
var errHeadRestart = errors.New("the chain reorganised above the cursor")

// headStep is readHeadStep, unless read holds blocks [from, to] already,
// read a moment ago (by the loop's look): then those burns, under the same
// continuity rule.
func (w *Writer) headStep(ctx context.Context, cur payments.Cursor, from, to int64, after string, read *headRead) ([]payments.Payment, string, error) {
	if read == nil || read.pending == nil || from > to {
		return w.readHeadStep(ctx, cur, from, to, after)
	}
	if first, last := ends(*read.pending); first != from || last != to {
		return w.readHeadStep(ctx, cur, from, to, after)
	}
	if err := continues(cur, after, from, *read.pending); err != nil {
		if errors.Is(err, chain.ErrBadReply) && from > cur.Block+1 {
			return nil, "", errHeadRestart
		}
		return nil, "", fmt.Errorf("reading burns above the target: %w", err)
	}
	ps, err := toPayments(w.cfg.ChainID, read.pending.Burns)
	return ps, hashHex(read.pending.To.Hash), err
}

// readHeadStep reads the canonical burns of blocks [from, to] as every
// writer reads (the first range continues the cursor's block, or after,
// where the last pass stood), and returns them with the hash of block to
// (after when nothing was read). Nothing read here is credited: no
// receipts, no quorum.
func (w *Writer) readHeadStep(ctx context.Context, cur payments.Cursor, from, to int64, after string) ([]payments.Payment, string, error) {
	if from > to {
		return nil, after, nil
	}
	ranges := w.read(chain.CreditsNothing(ctx), readSpec{contracts: w.cfg.Contracts, from: from, to: to, ledger: cur, after: after})
	defer ranges.Stop()
	var burns []chain.Burn
	for !ranges.Done() {
		r, err := ranges.Next(ctx)
		if errors.Is(err, chain.ErrBadReply) && from > cur.Block+1 {
			return nil, "", errHeadRestart
		}
		if err != nil {
			// At the cursor, the ledger's next poll judges; above it,
			// the head moved while we read. Either way nothing is
			// written now.
			return nil, "", fmt.Errorf("reading burns above the target: %w", err)
		}
		burns = append(burns, r.Burns...)
	}
	ps, err := toPayments(w.cfg.ChainID, burns)
	return ps, ranges.End(), err
}

// headStart is where a pass reads from, and the hash its first block must
// continue: after where the last pass stood when that is above the cursor
// and still within the window, else right after the cursor. At the head
// itself (nothing new), a head whose hash is not the one the last pass
// read means the chain reorganised: the pass starts again from the cursor.
func headStart(cur payments.Cursor, scan payments.HeadScan, head chain.Header, top int64) (int64, string) {
	switch {
	case scan.Block <= cur.Block || scan.Block > top:
		return cur.Block + 1, cur.Hash
	case scan.Block == ledgerBlock(head.Number) && hashHex(head.Hash) != scan.Hash:
		return cur.Block + 1, cur.Hash
	}
	return scan.Block + 1, scan.Hash
}

// restartHead records that the group's head tracking starts again from
// the cursor (the chain reorganised above it) and ends the pass; the next
// pass reads from the cursor on, judging every pending row again.
func (w *Writer) restartHead(t *RangeTx, ctx context.Context, id string, cur payments.Cursor, head chain.Header) (HeadTotals, error) {
	if err := t.tx.SetHeadScan(ctx, id, cur.Block, cur.Hash); err != nil {
		return HeadTotals{}, err
	}
	if _, err := t.Commit(ctx); err != nil {
		return HeadTotals{}, err
	}
	w.log.Info("head tracking starts again from the cursor: the chain reorganised above it", slog.Int64("cursor", cur.Block))
	return HeadTotals{From: cur.Block + 1, To: cur.Block, Head: head, Behind: true}, nil
}

// pendingDiff is what a head tracking pass changes: the pending rows to
// remove and to put (a moved burn's new row replaces its old one), the
// events to record, in order, and how many rows are pending afterwards.
type pendingDiff struct {
	drop, put []payments.Payment
	events    []payments.Event
	pending   int
}

// diffPending makes the pending rows agree with the chain over the blocks
// a pass read, [from, to]: rows are the pending rows, onChain the canonical
// burns of those blocks, and recorded the block hash the ledger holds for
// those of both that are payments (by key).
//
//   - A burn the ledger holds is not pending: its row goes, retracted only
//     if it was seen elsewhere than where it was recorded.
//   - A row below from is not judged: one at or below the cursor is the
//     ledger's to settle (whatever records its block: the loop, a backfill
//     of blocks a reset skipped), one above it was judged by an earlier
//     pass.
//   - A row above to (beyond this pass's step, or above a head that
//     dropped) is kept: what the node did not show is not judged.
//   - A row whose burn the chain holds at the same block hash is kept; at
//     another, retracted where it was and seen where it is; nowhere,
//     retracted and removed.
//   - A burn on the chain that is neither recorded nor pending is put and
//     seen.
func diffPending(from, to int64, rows []payments.Pending, onChain []payments.Payment, recorded map[payments.Key]string) pendingDiff {
	var d pendingDiff
	want := make(map[payments.Key]payments.Payment, len(onChain))
	for _, p := range onChain {
		if _, done := recorded[p.Key()]; !done {
			want[p.Key()] = p
		}
	}
	kept := map[payments.Key]bool{}
	for _, r := range rows {
		key := r.Key()
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
		case r.BlockNumber < from:
			kept[key] = true
		default:
			d.drop = append(d.drop, r.Payment)
			d.events = append(d.events, payments.EventFor(payments.KindRetracted, r.Payment, 0))
		}
	}
	for _, p := range onChain {
		key := p.Key()
		if _, ok := want[key]; !ok || kept[key] {
			continue
		}
		d.put = append(d.put, p)
		d.events = append(d.events, payments.EventFor(payments.KindSeen, p, 0))
	}
	d.pending = len(kept) + len(d.put)
	return d
}

// trackHead runs head tracking passes after the ledger reached target
// (read by the poll just before): one, or, while the window above the
// cursor is read in steps, the next ones at once, for up to POLL_INTERVAL,
// each its own short transaction. A failure is logged and counted, never
// returned: the ledger goes on, and readiness does not change.
func (l *Loop) trackHead(stop, drain context.Context, target chain.Target, read *headRead) {
	deadline := time.Now().Add(l.cfg.PollInterval)
	for {
		res, ok := l.trackHeadOnce(stop, drain, target, read)
		read = nil // a later pass reads on from where this one stopped
		if !ok || !res.Behind || stop.Err() != nil || !time.Now().Before(deadline) {
			return
		}
		l.beat.Beat()
	}
}

func (l *Loop) trackHeadOnce(stop, drain context.Context, target chain.Target, read *headRead) (HeadTotals, bool) {
	ctx, cancel := context.WithTimeout(drain, l.w.cfg.TxTimeout)
	defer cancel()
	res, err := l.w.trackHead(stop, ctx, l.cfg.CursorID, l.cfg.PendingMaxBlocks, &target, read)
	switch {
	case errors.Is(err, errHeadSkipped), err != nil && stop.Err() != nil:
		l.metrics.headTracked(headSkipped, 0)
		return res, false
	case err != nil:
		l.metrics.headTracked(headError, 0)
		l.log.Warn("head tracking failed; pending payments may be stale, the ledger goes on",
			slog.Any("err", err), slog.String("class", string(chain.ClassOf(err))))
		l.Signals.HeadFailed.Send(err)
		return res, false
	}
	l.metrics.headTracked(headOK, res.Pending)
	l.metrics.head(ledgerBlock(res.Head.Number))
	if res.Seen > 0 || res.Retracted > 0 {
		l.log.Info("head tracked", slog.Int64("from", res.From), slog.Int64("to", res.To),
			slog.Uint64("head", res.Head.Number), slog.Int("seen", res.Seen), slog.Int("retracted", res.Retracted),
			slog.Int("pending", res.Pending))
	}
	l.Signals.HeadTracked.Send(res)
	return res, true
}
