package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// looker is what a replica keeping up with the chain asks of the node
// instead of the target, the ranges and the head one by one (see
// Loop.follow); *chain.Endpoints is the real one. A Node without it is
// read one read at a time.
type looker interface {
	// CanLook says looks can serve this configuration at all.
	CanLook() bool
	// HeadNumber is the head block's number, the cheapest read that says
	// whether the head moved.
	HeadNumber(ctx context.Context) (uint64, error)
	// Look reads the head's header, the target and the burns above the
	// cursor in one batch; an error wrapping chain.ErrNoLook says to read
	// one read at a time instead.
	Look(ctx context.Context, spec chain.LookSpec) (chain.Look, error)
}

// headRead is what a poll read of the head, for the head tracking pass
// after it: the head's header and the burns of the blocks above the target
// from where that pass goes on (nil when none).
type headRead struct {
	head    chain.Header
	pending *chain.Range
}

// follow is the poll of a replica that keeps up with the chain (its last
// poll left the cursor at the target), holding the cursor: first the head
// (its header when a new block is due, else its number: see readHead);
// while it stands where it was last read (by head tracking, or without it
// by this replica's last look), what still reads (outUnmoved, or the
// target's blocks when the target passed the cursor); else one look
// (chain.Look) that carries the target and one eth_getLogs over the blocks
// the target passed and those above it head tracking has not read, with
// the head's header when the poll read only its number, and a rescan's
// blocks when one is due. done is false when the look cannot serve (a
// window wider than the endpoint's ranges, a quorum, an endpoint lagging
// or refusing the range): the poll then reads one read at a time.
//
// On a chain slower than the polls, a block replaced at the head's height
// between two polls (a one-block reorganisation) is read with the next
// block: the head's number alone does not show it, and its hash is what
// the next block's parent is checked against.
func (l *Loop) follow(ctx context.Context, tx *RangeTx, lk looker) (out outcome, done bool, err error) {
	readAt := time.Now()
	l.readAt = readAt
	cur := tx.Cursor()
	read, err := l.readTo(ctx, tx)
	if err != nil {
		return outIdle, true, err
	}
	n, known, err := l.readHead(ctx, lk)
	if err != nil {
		return outIdle, true, fmt.Errorf("reading the head: %w", err)
	}
	if n > l.number || l.numberAt.IsZero() {
		// Only a head higher than any read restarts the still clock: a
		// node that now and then answers a block lower (a balancer with one
		// backend behind, a reorganisation in progress) has not moved on.
		l.number, l.numberAt = n, readAt
	}
	head := ledgerBlock(n)
	l.metrics.head(head)
	rescan := l.rescanDue(cur)
	if head == max(read.Block, cur.Block) && (known == nil || head != read.Block || hashHex(known.Hash) == read.Hash) {
		// Nothing moved since this head was read (or the cursor reached
		// it): no block above the target to read.
		if known != nil {
			l.headMoved(*known)
		}
		if !rescan || !l.headStill() {
			out, err := l.still(ctx, tx, head, known, readAt)
			return out, true, err
		}
		// A rescan due on a head standing still rides a look as on a
		// moving one.
	}
	// Without head tracking nothing above the target is read.
	seen := max(read.Block, cur.Block) + 1
	if !l.cfg.Pending {
		seen = head + 1
	}
	spec := chain.LookSpec{Contracts: l.w.cfg.Contracts, Cursor: cur.Block, Seen: nodeBlock(seen), Head: n, Known: known}
	from := cur.Block
	if rescan {
		// The rescan rides the look: its blocks are asked with the others.
		from = max(cur.Block-l.cfg.RescanDepth+1, l.cfg.StartBlock)
		spec.Recheck, spec.RecheckFrom = true, nodeBlock(from)
	}
	if head < cur.Block {
		return outIdle, false, nil
	}
	look, err := lk.Look(ctx, spec)
	switch {
	case errors.Is(err, chain.ErrNoLook):
		return outIdle, false, nil
	case err != nil:
		return outIdle, true, err
	}
	out, err = l.recordLook(ctx, tx, look, from, readAt)
	return out, true, err
}

// still is the poll of a head standing where it was last read. The cursor
// at the head (or above it, on a node behind) is provably at the target,
// which is never above the head: nothing to read. Below the head, the
// target may pass the cursor without a new block (a chain that seals only
// when it has a transaction finalizes its last blocks minutes later, when
// its parent chain does): once the head has stood still for longer than a
// block takes (headStill), the poll reads the target, and the blocks it
// passed as a range transaction reads any (toTarget). Before then, as
// between two blocks of a moving chain, the target the look of the head's
// last move read stands: the next block comes with its own look.
func (l *Loop) still(ctx context.Context, tx *RangeTx, head int64, known *chain.Header, readAt time.Time) (outcome, error) {
	cur := tx.Cursor()
	switch {
	case cur.Block >= head:
		l.checked(readAt)
	case l.headStill():
		target, err := l.w.node.Target(ctx)
		if err != nil {
			return outIdle, fmt.Errorf("reading the target of a head standing still: %w", err)
		}
		if target.Block > cur.Block {
			if known != nil {
				// Head tracking after the commit takes this read of the head.
				l.read = &headRead{head: *known}
			}
			return l.toTarget(ctx, tx, target, readAt)
		}
		l.readTarget(target, cur.Block, readAt)
	}
	if _, err := l.commitPolled(ctx, tx, readAt); err != nil {
		return outIdle, err
	}
	l.Signals.Idle.Send(cur.Block)
	return outUnmoved, nil
}

// headStill says the head has stood at the number this replica's polls
// read for longer than a block takes (the heads' timestamps' block time,
// at most MaxBlockTime; MaxBlockTime while not known) plus a poll
// interval: on a chain sealing on a clock, a block late by more than a
// poll. The time counts from this replica's first read of the highest
// number it read, whoever read the block itself (replicas of one group take
// turns at the reads); a lower number read meanwhile does not restart it.
func (l *Loop) headStill() bool {
	bt := l.blockTime
	if bt <= 0 || bt > l.cfg.MaxBlockTime {
		bt = l.cfg.MaxBlockTime
	}
	return time.Since(l.numberAt) >= bt+l.cfg.PollInterval
}

// recordLook records what look read in tx and commits: the rescan it
// carries, compared with the ledger (a node now answering otherwise makes
// the poll rescan as every rescan does, and credit nothing); the blocks the
// target passed, as Advance records a range, under the same continuity
// rule. The blocks above the target go to the head tracking pass after the
// commit (l.read).
func (l *Loop) recordLook(ctx context.Context, tx *RangeTx, look chain.Look, from int64, readAt time.Time) (outcome, error) {
	l.headMoved(look.Head)
	l.metrics.head(ledgerBlock(look.Head.Number))
	l.readTarget(look.Target, tx.Cursor().Block, readAt)
	if look.Recheck != nil {
		clean, err := tx.Recheck(ctx, from, *look.Recheck)
		if err != nil {
			return outIdle, err
		}
		if !clean {
			return outIdle, l.rescan(ctx, tx, from, readAt)
		}
	}
	out := outIdle
	if look.Credit != nil {
		if _, err := tx.AdvanceWith(ctx, *look.Credit); err != nil {
			return outIdle, err
		}
		out = outCommitted
	}
	res, err := l.commitPolled(ctx, tx, readAt)
	if err != nil {
		return outIdle, err
	}
	if look.Recheck != nil {
		l.rescanned(res)
	}
	if out == outCommitted {
		l.committed(res, look.Target)
	} else {
		l.Signals.Idle.Send(tx.Cursor().Block)
	}
	l.read = &headRead{head: look.Head, pending: look.Pending}
	return out, nil
}

// rescan rescans blocks [from, cursor] in tx as the standard poll does at
// the target (its own read, with receipts), and commits.
func (l *Loop) rescan(ctx context.Context, tx *RangeTx, from int64, readAt time.Time) error {
	if _, err := tx.Rescan(ctx, from); err != nil {
		return err
	}
	res, err := l.commitPolled(ctx, tx, readAt)
	if err != nil {
		return err
	}
	l.rescanned(res)
	l.Signals.Idle.Send(tx.Cursor().Block)
	return nil
}

// commitPolled marks the chain read at readAt, with the cursor left at the
// target, and commits tx: the other replicas of the group leave the reads
// to this one (see skip, deferTo). A poll marks it only when it moved the
// cursor to the target, read the target, or found the cursor provably at
// it, or, between two blocks of a moving chain, while the target the look
// of the head's last move read stands (see still).
func (l *Loop) commitPolled(ctx context.Context, tx *RangeTx, readAt time.Time) (Totals, error) {
	if err := tx.MarkPolled(ctx, time.Since(readAt)); err != nil {
		return Totals{}, err
	}
	res, err := tx.Commit(ctx)
	if err == nil {
		l.latch.polled(readAt)
	}
	return res, err
}

// readTarget notes target, read at readAt with the cursor at cursor: for
// the head tracking pass after the poll, the metrics, and readiness.
func (l *Loop) readTarget(target chain.Target, cursor int64, readAt time.Time) {
	l.target = target
	l.metrics.target(target.Highest, cursor)
	l.checked(readAt)
}

// checked notes that at readAt this replica knew where the target stands
// against the cursor: it read the target, or found the cursor at the head.
func (l *Loop) checked(readAt time.Time) {
	l.latch.checked(readAt)
	l.metrics.targetChecked(readAt)
}

// readTo is the head last read, with its hash: where the group's head
// tracking stands, or, without head tracking, the last head this replica's
// looks read (-1 before one).
func (l *Loop) readTo(ctx context.Context, tx *RangeTx) (payments.HeadScan, error) {
	if l.cfg.Pending {
		return tx.headScan(ctx)
	}
	if l.headAt.IsZero() {
		return payments.HeadScan{Block: -1}, nil
	}
	return payments.HeadScan{Block: ledgerBlock(l.lastHead.Number), Hash: hashHex(l.lastHead.Hash)}, nil
}

// readHead reads the head: its header when a new block is due (see
// headDue), which also shows a block replaced at the head's height, else
// only its number, which costs less at the provider (10 compute units
// against 16 in the default table), however many polls find it unmoved.
func (l *Loop) readHead(ctx context.Context, lk looker) (uint64, *chain.Header, error) {
	if l.headDue() {
		h, err := l.w.node.Head(ctx)
		if err != nil {
			return 0, nil, err
		}
		return h.Number, &h, nil
	}
	n, err := lk.HeadNumber(ctx)
	return n, nil, err
}

// headDue says a new block is likely there: a new head woke the poll, or
// the head this replica last saw move moved as long ago as blocks take,
// less half a poll interval (a 2 s chain polled every 2 s: every poll; a
// 12 s one: every sixth), or the block time is not known yet.
func (l *Loop) headDue() bool {
	if !l.woken.IsZero() || l.blockTime <= 0 {
		return true
	}
	return time.Since(l.headAt) >= l.blockTime-l.cfg.PollInterval/2
}

// headMoved notes the head a look read: when it moved, when this replica
// saw it move, and the block time its header's timestamp and the last
// one's give.
func (l *Loop) headMoved(h chain.Header) {
	last := l.lastHead
	if h.Number <= last.Number && !l.headAt.IsZero() {
		return
	}
	if !l.headAt.IsZero() && h.Number > last.Number && h.Time >= last.Time {
		l.blockTime = time.Duration(h.Time-last.Time) * time.Second / time.Duration(h.Number-last.Number)
	}
	l.lastHead, l.headAt = h, time.Now()
}

// AdvanceWith records r, a range read right after the cursor (a look's),
// as Advance records the ranges it reads, under the same continuity rule,
// and moves the cursor to its end.
func (t *RangeTx) AdvanceWith(ctx context.Context, r chain.Range) (Totals, error) {
	if err := t.use(); err != nil {
		return Totals{}, err
	}
	cur := t.cur
	if err := checkSpan(r, cur.Block+1, ledgerBlock(r.To.Number)); err != nil {
		return Totals{}, err
	}
	if err := continues(cur, "", cur.Block+1, r); err != nil {
		return Totals{}, err
	}
	got, err := t.record(ctx, r, t.w.contracts())
	if err != nil {
		return Totals{}, err
	}
	t.totals.Logs += got.logs
	t.totals.Rejected += got.rejected
	t.totals.Inserted += got.inserted
	t.totals.Duplicates += got.duplicates
	_, end := ends(r)
	if err := t.tx.MoveCursor(ctx, cur.ID, cur.Block, end, hashHex(r.To.Hash)); err != nil {
		return Totals{}, err
	}
	t.totals.To = end
	return t.totals, nil
}

// headScan is where the group's head tracking stands, read under the
// cursor's lock.
func (t *RangeTx) headScan(ctx context.Context) (payments.HeadScan, error) {
	return t.tx.HeadScan(ctx, t.cur.ID)
}
