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

// outcome is what one poll did.
type outcome int

const (
	outIdle      outcome = iota // cursor at target, or stopped before taking the lock
	outCommitted                // range committed, target reached
	outBehind                   // range committed, more to do at once
	outStandby                  // another writer holds the lock
	outSkipped                  // another replica read the chain just now (see skip)
	outYielded                  // another replica is catching up (see yield)
	outUnmoved                  // the head stands where head tracking read it (see follow)
	outDeferred                 // the group's preferred holder reads it (see deferTo)
)

// poll runs one range transaction: begin, lock the cursor, read the target,
// then either record the ranges up to it or, at the target, rescan when
// due; commit.
func (l *Loop) poll(stop, drain context.Context) (out outcome, err error) {
	l.read = nil
	start := time.Now()
	defer func() { l.metrics.poll(time.Since(start), resultLabel(out, err)) }()
	ctx, cancel := context.WithTimeout(drain, l.w.cfg.TxTimeout)
	defer cancel()
	lockStart := time.Now()
	tx, err := l.w.Begin(stop, ctx, l.cfg.CursorID)
	l.metrics.lockWait(time.Since(lockStart))
	switch {
	case errors.Is(err, payments.ErrLockTimeout):
		l.Signals.Standby.Send(struct{}{})
		return outStandby, nil
	case err != nil && stop.Err() != nil:
		return outIdle, nil
	case err != nil:
		return outIdle, err
	}
	defer tx.Rollback()
	l.metrics.lockHeld(true)
	defer l.metrics.lockHeld(false)
	cur := tx.Cursor()
	l.metrics.cursor(cur.Block)
	if out, done, err := l.standAside(ctx, tx); done {
		return out, err
	}
	defer func() { l.caughtUp = err == nil && (out == outIdle || out == outCommitted || out == outUnmoved) }()
	if lk, ok := l.w.node.(looker); ok && lk.CanLook() && l.caughtUp && !l.cfg.UntilCaughtUp {
		if out, done, err := l.follow(ctx, tx, lk); done {
			return out, err
		}
	}

	readAt := time.Now()
	l.readAt = readAt
	target, err := l.w.node.Target(ctx)
	if err != nil {
		return outIdle, fmt.Errorf("reading the target: %w", err)
	}
	return l.toTarget(ctx, tx, target, readAt)
}

// toTarget records in tx the ranges up to target, read at readAt, or, at
// the target, rescans when due, and commits.
func (l *Loop) toTarget(ctx context.Context, tx *RangeTx, target chain.Target, readAt time.Time) (outcome, error) {
	cur := tx.Cursor()
	l.readTarget(target, cur.Block, readAt)

	if _, _, ok := NextRange(cur.Block, target.Block, 1); !ok {
		// Rescan only through a node that can prove the cursor block: one
		// behind it may lack the block or sit on a minority fork.
		rescan := target.Block >= cur.Block && l.rescanDue(cur)
		if rescan {
			if _, err := tx.Rescan(ctx, max(cur.Block-l.cfg.RescanDepth+1, l.cfg.StartBlock)); err != nil {
				return outIdle, err
			}
		}
		res, err := l.commitPolled(ctx, tx, readAt)
		if err != nil {
			return outIdle, err
		}
		if rescan {
			l.rescanned(res)
		}
		l.Signals.Idle.Send(cur.Block)
		return outIdle, nil
	}

	adv, err := tx.Advance(ctx, target.Block, l.w.BatchBudget())
	if err != nil {
		return outIdle, err
	}
	var res Totals
	if adv.To >= target.Block {
		res, err = l.commitPolled(ctx, tx, readAt)
	} else {
		res, err = tx.Commit(ctx)
	}
	if err != nil {
		return outIdle, err
	}
	l.committed(res, target)
	if res.To < target.Block {
		return outBehind, nil
	}
	return outCommitted, nil
}

// committed reports a committed transaction that advanced the cursor
// towards target.
func (l *Loop) committed(res Totals, target chain.Target) {
	l.moved = res.To
	l.metrics.cursor(res.To)
	l.metrics.target(target.Highest, res.To)
	l.log.Info("range committed", slog.Int64("from", res.From), slog.Int64("to", res.To),
		slog.Int("logs", res.Logs), slog.Int64("inserted", res.Inserted), slog.Int64("duplicates", res.Duplicates),
		slog.Int("rejected", res.Rejected), slog.Int64("target", target.Block))
	l.Signals.Committed.Send(res)
}

// rescanDue reports whether the group's rescan is due. The schedule lives
// in the cursor row and is read against the database's clock, so the group
// rescans once per interval however many replicas it has, whatever their
// clocks say.
func (l *Loop) rescanDue(cur payments.Cursor) bool {
	return l.cfg.RescanDepth > 0 && cur.Block >= l.cfg.StartBlock &&
		(cur.RescannedAt.IsZero() || cur.Now.Sub(cur.RescannedAt) >= l.cfg.RescanInterval)
}

// rescanned reports a committed rescan.
func (l *Loop) rescanned(res Totals) {
	if res.Recovered > 0 {
		l.log.Error("rescan found burns missing from committed blocks; a node answered with less than the chain holds",
			slog.Int64("recovered", res.Recovered), slog.Int64("from", res.RescanFrom), slog.Int64("to", res.RescanTo))
	}
	l.Signals.Rescanned.Send(res)
}

func resultLabel(out outcome, err error) string {
	switch {
	case err != nil:
		return ResultError
	case out == outStandby, out == outSkipped, out == outYielded, out == outDeferred:
		return ResultStandby
	case out == outCommitted, out == outBehind:
		return ResultCommitted
	}
	return ResultIdle
}
