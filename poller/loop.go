// Package poller turns burn logs into payments. Every write goes through one
// range transaction (Writer, RangeTx) that locks the cursor row, checks
// continuity, reads the chain, records the range's payments and advances the
// cursor, so that only one writer of a group works at a time and a range is
// either wholly recorded or not at all. The live loop (Loop), backfills
// (Backfill), rescans and cursor resets (Writer.Reset) all use it; Verifier
// only reads.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/testsignal"
	"github.com/burnpoller/burnpoller/payments"
)

// LoopConfig is the live loop's behaviour; see cmd/poller for the variables
// behind it.
type LoopConfig struct {
	CursorID     string
	StartBlock   int64
	PollInterval time.Duration
	// DrainTimeout is how long an in-flight transaction may go on after
	// Run's context is cancelled before it is rolled back.
	DrainTimeout time.Duration
	// MaxBackoff caps the wait after errors; zero means 30 seconds.
	MaxBackoff time.Duration
	// RescanDepth is how many committed blocks below the cursor a rescan
	// re-reads; zero disables rescans.
	RescanDepth int64
	// RescanInterval is the least time between rescans.
	RescanInterval time.Duration
	// UntilCaughtUp makes Run return once the cursor has reached the target.
	UntilCaughtUp bool
	// Wake, if set, ends the wait after reaching the target early: a new
	// head arrived (chain.WatchHeads).
	Wake <-chan struct{}
	// Pending turns head tracking on: once at the target, the lock holder
	// keeps pending_payments equal to the burns between the target and the
	// head, at most PendingMaxBlocks above the target.
	Pending          bool
	PendingMaxBlocks int64
	// Holder, if set, says whether this replica is the group's preferred
	// holder (a replica set serving several groups spreads them); nil,
	// whichever replica takes the row works, as in a replica set of one
	// group.
	Holder Holder
	// MaxBlockTime is the longest a block is expected to take, whatever
	// the heads' timestamps say (a chain that seals only when it has a
	// transaction gives any estimate): a head that has stood still for the
	// block time, at most this, plus a poll interval has the polls read the
	// finality target (see Loop.still). Zero means DefaultMaxBlockTime.
	MaxBlockTime time.Duration
}

// DefaultMaxBlockTime is LoopConfig.MaxBlockTime's default: above the block
// time of the chains that seal on a clock (Ethereum's 12 s, Filecoin's
// 30 s), so that the polls between their blocks read no more than the head.
const DefaultMaxBlockTime = 30 * time.Second

// Holder says which replica of a group's replica set should work the group
// now.
type Holder interface {
	// Preferred says whether this replica is the group's preferred holder;
	// known is false while no preference is known.
	Preferred() (this, known bool)
}

// LoopSignals tell a test what the loop did; they are off unless a test
// initialises them.
type LoopSignals struct {
	// Committed: a transaction that advanced the cursor committed.
	Committed testsignal.Signal[Totals]
	// Idle: the loop reached the target (the cursor block) and committed.
	Idle testsignal.Signal[int64]
	// Standby: another writer held the lock.
	Standby testsignal.Signal[struct{}]
	// Skipped: the loop took the lock and let another replica's recent
	// read of the chain stand (see Loop.skip).
	Skipped testsignal.Signal[struct{}]
	// Failed: a transaction failed and was rolled back.
	Failed testsignal.Signal[error]
	// Latched: a finality violation latched; Cleared: a reset cleared it.
	Latched testsignal.Signal[*ViolationError]
	Cleared testsignal.Signal[payments.Cursor]
	// LatchChecked: while latched, the loop looked for a reset and found
	// none (it writes nothing meanwhile).
	LatchChecked testsignal.Signal[payments.Cursor]
	// Rescanned: a rescan committed.
	Rescanned testsignal.Signal[Totals]
	// HeadTracked: a head tracking pass committed; HeadFailed: one failed
	// (the ledger went on).
	HeadTracked testsignal.Signal[HeadTotals]
	HeadFailed  testsignal.Signal[error]
	// Stopping: Run's context ended; an in-flight transaction has
	// DrainTimeout from now.
	Stopping testsignal.Signal[struct{}]
}

// Loop is the live poller: it repeats range transactions on the group's
// cursor until stopped. Health is safe to call concurrently with Run.
type Loop struct {
	cfg     LoopConfig
	w       *Writer
	metrics *Metrics
	log     *slog.Logger
	beat    *Heartbeat
	latch   latch
	// woken is when a new head ended the last wait, zero when the timer
	// did (see skip).
	woken time.Time
	// moved is where this replica's last committed transaction left the
	// cursor (-2 before one; the seeded block when the cursor was still
	// there at start), so that it knows its own moves (see yield).
	moved int64
	// target is the target the last poll read, and read what it read of
	// the head (nil: nothing), for the head tracking passes after it.
	target chain.Target
	read   *headRead
	// caughtUp says this replica's last poll read the chain and left the
	// cursor at the target: the next one may follow the chain (see
	// follow).
	caughtUp bool
	// lastHead is the newest head a look read, headAt when this replica
	// saw it, and blockTime the chain's block time as the heads' timestamps
	// tell it (0: not known yet); see headDue.
	lastHead  chain.Header
	headAt    time.Time
	blockTime time.Duration
	// number is the head's number as this replica's polls last read it,
	// by header or number, and numberAt when they first read it there: a
	// head another replica saw move (head tracking's reads are the
	// group's) moved all the same (see headStill).
	number   uint64
	numberAt time.Time
	// readAt is when this replica last began a read of the chain, and
	// deferWait how long to wait after deferring to another (see deferTo).
	readAt    time.Time
	deferWait time.Duration

	// Signals are for tests; set them up before Run.
	Signals LoopSignals
}

// NewLoop returns the live loop of w's group. beat is the liveness
// heartbeat it keeps while running; metrics may be nil.
func NewLoop(cfg LoopConfig, w *Writer, metrics *Metrics, beat *Heartbeat, log *slog.Logger) *Loop {
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	if cfg.MaxBlockTime <= 0 {
		cfg.MaxBlockTime = DefaultMaxBlockTime
	}
	return &Loop{cfg: cfg, w: w, metrics: metrics, beat: beat, log: log, moved: -2}
}

// Health returns why the loop is not ready, or nil: a latched finality
// violation, a hook the group no longer agrees with, transactions failing
// without a success for FailingFor, or polls marking the group read (so
// that the other replicas leave it to this one) for FailingFor without
// knowing where its finality target stands (a stalled replica; an idle
// chain, the cursor at a still head, is checked at every poll).
func (l *Loop) Health() error { return l.latch.health() }

// Violation returns the latched finality violation, or "" if there is none.
func (l *Loop) Violation() string { return l.latch.text() }

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

// handoff is how recently another replica must have moved the cursor for
// this one, taking the row, to hand it back (see yield), and how long it
// then waits before asking again.
const (
	handoffWindow = 200 * time.Millisecond
	handoffPause  = 20 * time.Millisecond
)

// Run polls until ctx is cancelled. Cancelling ctx stops new transactions
// and lock waits at once; a transaction already holding the lock may finish
// for up to DrainTimeout before it is rolled back. Run returns nil after a
// clean stop, a *ViolationError when UntilCaughtUp and a violation latched,
// or an error when it cannot start (the cursor cannot be seeded before ctx
// ends).
func (l *Loop) Run(ctx context.Context) error {
	// Three contexts, each under one name throughout the package: stop
	// (Run's: ends waits, starts the shutdown), drain (outlives stop by
	// DrainTimeout: bounds the work in flight), and ctx, an operation's
	// own (a transaction's: drain with TX_TIMEOUT).
	drain, cancelDrain := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDrain()
	go func() {
		select {
		case <-drain.Done():
			return
		case <-ctx.Done():
		}
		l.Signals.Stopping.Send(struct{}{})
		t := time.NewTimer(l.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-drain.Done():
		case <-t.C:
			cancelDrain()
		}
	}()

	defer l.w.ForgetAhead()
	if err := l.seed(ctx); err != nil {
		return err
	}
	b := newBackoff(l.cfg.MaxBackoff)
	for ctx.Err() == nil {
		l.beat.Beat()
		if _, latched := l.latch.latched(); latched {
			l.checkReset(ctx)
			sleep(ctx, l.cfg.PollInterval, l.beat)
			continue
		}
		started := time.Now()
		out, err := l.poll(ctx, drain)
		l.latch.note(err)
		var v *ViolationError
		switch {
		case errors.As(err, &v):
			l.latchViolation(ctx, v)
			if l.cfg.UntilCaughtUp {
				return err
			}
		case err != nil && ctx.Err() != nil:
			l.log.Info("transaction ended by shutdown", slog.Any("err", err))
		case NeedsHashes(err):
			// The ledger check needs hashes from the node: read them
			// outside the transaction, then go on at once.
			if ferr := l.w.FetchHashes(ctx, err); ferr != nil {
				l.log.Error("reading the canonical hashes a ledger check needs; retrying", slog.Any("err", ferr))
				sleep(ctx, retryWait(b, ferr, l.cfg.MaxBackoff), l.beat)
			}
		case err != nil:
			l.Signals.Failed.Send(err)
			wait := retryWait(b, err, l.cfg.MaxBackoff)
			l.log.Error("poll failed; rolled back, retrying", slog.Any("err", err),
				slog.String("class", string(chain.ClassOf(err))), slog.Duration("retry_in", wait))
			sleep(ctx, wait, l.beat)
		case out == outBehind, out == outStandby:
			b.Reset()
		case out == outSkipped, out == outUnmoved:
			b.Reset()
			l.idle(ctx, started)
		case out == outYielded:
			b.Reset()
			sleep(ctx, handoffPause, l.beat)
		case out == outDeferred:
			b.Reset()
			sleep(ctx, l.deferWait, l.beat)
		case l.cfg.UntilCaughtUp && ctx.Err() == nil:
			l.log.Info("caught up with the target; stopping as asked")
			return nil
		default:
			b.Reset()
			if l.cfg.Pending && ctx.Err() == nil {
				l.trackHead(ctx, drain, l.target, l.read)
			}
			l.idle(ctx, started)
		}
	}
	return nil
}

// idle waits, after reaching the target, until POLL_INTERVAL after the
// poll started (the loop looks at the chain every POLL_INTERVAL, however
// long a poll and its head tracking took), or less if a new head arrives
// first.
func (l *Loop) idle(ctx context.Context, started time.Time) {
	wait := l.cfg.PollInterval - time.Since(started)
	if wait <= 0 {
		l.beat.Beat()
		return
	}
	if l.cfg.Wake == nil {
		sleep(ctx, wait, l.beat)
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	l.woken = time.Time{}
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-l.cfg.Wake:
		l.woken = time.Now()
	}
	l.beat.Beat()
}

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

// seed creates the cursor row at START_BLOCK-1 unless it exists, retrying
// while the database or the node is unreachable.
func (l *Loop) seed(ctx context.Context) error {
	start := l.cfg.StartBlock - 1
	_, err := backoff.Retry(ctx, func() (payments.Cursor, error) {
		l.beat.Beat()
		c, err := l.w.Seed(ctx, l.cfg.CursorID, start)
		if err != nil {
			return c, err
		}
		if c.Block != start {
			l.log.Info("cursor exists; START_BLOCK does not move it",
				slog.String("cursor_id", c.ID), slog.Int64("cursor_block", c.Block), slog.Int64("start_block", l.cfg.StartBlock))
		} else {
			// A cursor no replica has moved yet (this one's seed, or
			// another's a moment ago) is nobody's catch-up to yield to.
			l.moved = c.Block
		}
		l.metrics.cursor(c.Block)
		return c, nil
	}, backoff.WithBackOff(newBackoff(l.cfg.MaxBackoff)), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, d time.Duration) {
		l.log.Warn("seeding cursor failed; retrying", slog.Any("err", err), slog.Duration("retry_in", d))
	}))
	if err != nil {
		return fmt.Errorf("seeding cursor %q: %w", l.cfg.CursorID, err)
	}
	return nil
}

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

// latchViolation stops the loop from advancing until the cursor is reset.
func (l *Loop) latchViolation(ctx context.Context, v *ViolationError) {
	// The gauge first: whoever sees the violation also sees the gauge.
	l.metrics.violation(true)
	l.latch.set(v)
	LogViolation(ctx, l.log, v)
	l.Signals.Latched.Send(v)
}

// checkReset clears a latched violation once an operator has moved the cursor.
func (l *Loop) checkReset(ctx context.Context) {
	latched, _ := l.latch.latched()
	c, err := l.w.store.Cursor(ctx, l.cfg.CursorID)
	// A reset moves the cursor, or at least stamps it (a reset to the same
	// block, after marking orphaned payments above it).
	if err != nil || (c.Block == latched.Block && c.Hash == latched.Hash && c.UpdatedAt.Equal(latched.UpdatedAt)) {
		l.Signals.LatchChecked.Send(c)
		return
	}
	l.metrics.violation(false)
	l.latch.clear()
	l.log.Warn("cursor was reset; finality violation cleared, resuming",
		slog.Int64("cursor_block", c.Block), slog.String("cursor_hash", c.Hash))
	l.Signals.Cleared.Send(c)
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
