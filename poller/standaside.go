package poller

import (
	"context"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// handoff is how recently another replica must have moved the cursor for
// this one, taking the row, to hand it back (see yield), and how long it
// then waits before asking again.
const (
	handoffWindow = 200 * time.Millisecond
	handoffPause  = 20 * time.Millisecond
)

// skip says another replica of the group read the chain recently enough
// that this poll lets that read stand, so that the node sees one poll per
// POLL_INTERVAL (or per new head) rather than one per replica: a read that
// left the cursor at the target began age ago (ok: one was ever marked),
// within nine tenths of POLL_INTERVAL when the timer ended this replica's
// wait, or after the new head that ended it. Each duration compares the
// database's clock with itself or this process's with itself, so clock
// skew between hosts does not matter.
func (l *Loop) skip(age time.Duration, ok bool) bool {
	if !ok {
		return false
	}
	if !l.woken.IsZero() {
		return age < time.Since(l.woken)
	}
	return age < l.cfg.PollInterval*9/10
}

// standAside lets another replica's work stand when it should (see yield,
// skip and deferTo): it commits what taking the row did (the group's
// contracts kept in step with this replica's, a rolling update's new
// member) and says so with done. The group's preferred holder, when there
// is one, neither yields nor skips: it takes the group back from whoever
// worked it meanwhile, and the others defer to it. A one-shot run
// (UntilCaughtUp) never stands aside at the target: it must see the target
// itself to stop.
func (l *Loop) standAside(ctx context.Context, tx *RangeTx) (out outcome, done bool, err error) {
	preferred, known := false, false
	if l.cfg.Holder != nil {
		preferred, known = l.cfg.Holder.Preferred()
	}
	switch {
	case preferred:
		return outIdle, false, nil
	case l.yield(tx.Cursor()):
		out = outYielded
	case l.cfg.UntilCaughtUp:
		return outIdle, false, nil
	default:
		age, polled, err := tx.PolledAge(ctx)
		switch {
		case err != nil:
			return outSkipped, true, err
		case known && l.deferTo(age, polled):
			out = outDeferred
		case l.skip(age, polled):
			out = outSkipped
		default:
			return outIdle, false, nil
		}
	}
	if _, err := tx.Commit(ctx); err != nil {
		return out, true, err
	}
	if out == outSkipped {
		l.Signals.Skipped.Send(struct{}{})
	} else {
		l.Signals.Standby.Send(struct{}{})
	}
	return out, true, nil
}

// deferTo says another replica, the group's preferred holder or one that
// took over from it, began a read of the chain for the group age ago (ok:
// one was ever marked), within a deferral window of 1.9 POLL_INTERVAL:
// this replica then leaves the reads to it, and looks again when that read
// is a window old. A holder that stops reading (dead, frozen, partitioned,
// its node down) is thus taken over at most 1.9 POLL_INTERVAL after its
// last read, the most a replica of one group may wait today (skip: its
// timer ends its wait up to a POLL_INTERVAL after the 0.9 POLL_INTERVAL a
// read stands), while a holder whose reads run late (a slow node, a busy
// machine) keeps its group. A group behind the target is not deferred: the
// cursor moving is what yield hands over, as before.
func (l *Loop) deferTo(age time.Duration, ok bool) bool {
	window := l.cfg.PollInterval * 19 / 10
	// A read this replica began itself is not another's (the ages come
	// from two clocks, each against itself: allow for the round trip).
	mine := !l.readAt.IsZero() && time.Since(l.readAt) <= age+100*time.Millisecond
	if !ok || mine || age >= window {
		return false
	}
	l.deferWait = max(window-age, 10*time.Millisecond)
	return true
}

// yield says another replica moved the cursor within handoffWindow of
// this one taking the row: it is catching up, and its next transaction is
// already waiting for the row with the ranges it fetched ahead in flight
// (Writer.readAhead). Taking over would throw those away and fetch them
// again, so this replica hands the row back and asks again shortly; a
// replica that stopped moving the cursor (dead, frozen, or at the target)
// is taken over as before, at most handoffWindow later.
func (l *Loop) yield(cur payments.Cursor) bool {
	return cur.Block != l.moved && !cur.UpdatedAt.IsZero() && cur.Now.Sub(cur.UpdatedAt) < handoffWindow
}
