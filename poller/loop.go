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
	// number is the highest head number this replica's polls read, by
	// header or number, and numberAt when they first read it there: a
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
