package poller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// RangeTx is one range transaction: bounded by the server's timeouts,
// holding the cursor row's lock for its whole life. Because the lock, the
// inserts and the cursor update share it, a writer that loses its session
// (crash, freeze, partition) can never commit, and the server-side timeouts
// free the lock of a holder that stopped responding. It reads top to bottom:
// begin, lock, check continuity, fetch, validate, record, notify, advance,
// commit.
//
// Its state changes only through its own methods: use (one operation per
// transaction), lockWriters, addEvents and retract.
type RangeTx struct {
	w    *Writer
	tx   *payments.Tx
	cur  payments.Cursor
	note payments.Notification
	// members are the group's contracts as the transaction found them
	// (nil for a writer of no group: a backfill).
	members []payments.Member
	// events are the lifecycle events gathered and not yet recorded (one
	// range's at most), in order.
	events []payments.Event
	totals Totals
	used   bool
	// writing is set once the transaction holds the contracts' writer lock.
	writing bool
	// pending is what the transaction, holding that lock, found of the
	// contracts' pending rows: none, and no one else can put one before it
	// ends (the head scan puts them under the same lock), so settling a
	// range has nothing to take and skips its statement, whose arguments
	// are every burn of the range (a tenth of a dense range's time).
	pending pendingState
	// reading is Advance's read, handed on to the next transaction at
	// commit (see Writer.readAhead).
	reading *rangeReader
	// careful is the writer's careful when the transaction began: every
	// insert of the transaction checks each row, whichever of its ranges
	// failed before.
	careful bool
}

// Totals is what a range transaction recorded.
type Totals struct {
	// From and To are the blocks the cursor advanced over (To < From when
	// it did not move).
	From, To   int64
	Logs       int
	Rejected   int
	Inserted   int64
	Duplicates int64
	// Events counts the lifecycle events recorded, by kind.
	Events map[string]int
	// Rescanned is set when the transaction re-read [RescanFrom, RescanTo]
	// below the cursor; Recovered is how many payments that found missing.
	Rescanned            bool
	RescanFrom, RescanTo int64
	Recovered            int64
}

// Begin opens cursor id's range transaction with the group's bounds and
// locks the cursor row. Until the lock is held nothing is in flight, so stop
// cancels the wait at once; after that the transaction runs under ctx (stop
// comes first only because it ends sooner). A lock held elsewhere for longer
// than LockWait gives payments.ErrLockTimeout; a hook other than the one
// recorded for the contract gives payments.ErrHookMismatch, checked before
// the wait so that a standby reports it too. On success the caller must
// Commit or Rollback.
func (w *Writer) Begin(stop, ctx context.Context, id string) (*RangeTx, error) {
	rule := writeRule
	if w.cfg.IgnoreGroupHook {
		rule = resetRule
	}
	return w.begin(stop, ctx, id, payments.Limits{LockWait: w.cfg.LockWait, TxTimeout: w.cfg.TxTimeout}, rule)
}

// beginRule is what a transaction checks when it takes the cursor.
type beginRule int

const (
	// writeRule: the group's hook (before the wait, and held once the
	// cursor is) and, on the group's own cursor, its contracts.
	writeRule beginRule = iota
	// resetRule: neither (a cursor reset, or a backfill told to ignore
	// the hook).
	resetRule
)

func (w *Writer) begin(stop, ctx context.Context, id string, limits payments.Limits, rule beginRule) (*RangeTx, error) {
	checkHook := rule == writeRule
	waitCtx, cancelWait := context.WithCancel(ctx)
	unhook := context.AfterFunc(stop, cancelWait)
	defer func() { unhook(); cancelWait() }()
	tx, err := w.store.Begin(waitCtx, limits)
	if err != nil {
		return nil, err
	}
	// The hook is checked before the wait, so that a standby with a stale
	// one says so, and held once the cursor is.
	if checkHook {
		if err := tx.CheckHook(waitCtx, w.cfg.ChainID, w.contracts(), w.cfg.HookDigest, payments.ReadHookRecords); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	cur, err := tx.LockCursor(waitCtx, id)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	t := &RangeTx{w: w, tx: tx, cur: cur, totals: Totals{From: cur.Block + 1, To: cur.Block}, careful: w.careful.Load()}
	if g := w.cfg.Group; g != nil && checkHook && id == g.CursorID {
		if err := t.syncMembers(ctx); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if checkHook {
		if err := tx.CheckHook(ctx, w.cfg.ChainID, w.contracts(), w.cfg.HookDigest, payments.HoldHookRecords); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	return t, nil
}

// removedReason is the reason of the retracted events of a contract's
// pending burns when its group stops following it.
const removedReason = "contract no longer followed by its group"

// syncMembers keeps the group's recorded contracts in step with the
// writer's, under the cursor's lock; MemberBackfiller reads the history of
// those added. The burns seen at the head for a contract the group stops
// following, and no other group follows, are retracted in the same
// transaction: nobody would ever confirm or retract them otherwise.
func (t *RangeTx) syncMembers(ctx context.Context) error {
	w, g := t.w, t.w.cfg.Group
	want := make([]payments.MemberSpec, len(w.cfg.Contracts))
	for i, c := range w.cfg.Contracts {
		want[i] = payments.MemberSpec{Contract: lowerHex(c), FirstBlock: g.FirstBlocks[i]}
	}
	members, removed, err := t.tx.SyncMembers(ctx, t.cur, w.cfg.ChainID, want, g.AllowRemoval)
	if err != nil {
		return err
	}
	t.members = members
	if len(removed) == 0 {
		return nil
	}
	taken, err := t.tx.TakeUnfollowedPending(ctx, t.cur.ID, w.cfg.ChainID, removed)
	if err != nil {
		return err
	}
	for _, p := range taken {
		t.retract(p.Payment, removedReason)
	}
	w.log.Warn("the group stopped following contracts; their burns seen at the head are retracted",
		slog.Any("contracts", removed), slog.Int("retracted", len(taken)))
	return nil
}

// Cursor is the cursor as the transaction locked it.
func (t *RangeTx) Cursor() payments.Cursor { return t.cur }

// Commit records the transaction's remaining events, notifies listeners of
// them and of the payments it inserted, and commits; the totals count in
// the metrics only once it has.
func (t *RangeTx) Commit(ctx context.Context) (Totals, error) {
	if err := t.tx.Notify(ctx, t.note); err != nil {
		return Totals{}, err
	}
	if err := t.flushEvents(ctx); err != nil {
		return Totals{}, err
	}
	// The events are numbered, and their notification sent, inside COMMIT.
	if err := t.tx.Commit(ctx); err != nil {
		return Totals{}, err
	}
	if t.careful {
		// The ranges that failed are recorded now, each row checked.
		t.w.careful.Store(false)
	}
	if r := t.reading; r != nil {
		t.reading = nil
		t.w.keepAhead(r)
	}
	t.w.metrics.committed(t.totals)
	return t.totals, nil
}

// use claims the transaction's one operation (Advance, Rescan, a head
// tracking pass or a reset): a cursor moved twice in one transaction would
// be checked against a stale hash.
func (t *RangeTx) use() error {
	if t.used {
		return errUsed
	}
	t.used = true
	return nil
}

// lockWriters waits, at most LOCK_WAIT, until no other writer of the
// group's contracts records, and keeps them off until the transaction ends
// (once per transaction): writers of a contract (the live loop, a backfill)
// then see each other's committed rows.
func (t *RangeTx) lockWriters(ctx context.Context) error {
	if t.writing {
		return nil
	}
	if err := t.tx.LockWriters(ctx, t.w.cfg.ChainID, t.w.contracts()); err != nil {
		return err
	}
	t.writing = true
	return nil
}

// addEvents gathers events to record with the transaction.
func (t *RangeTx) addEvents(evs ...payments.Event) { t.events = append(t.events, evs...) }

// retract gathers the retracted event of burn p; reason says why when the
// chain did not cause it ("" when it did).
func (t *RangeTx) retract(p payments.Payment, reason string) {
	e := payments.EventFor(payments.KindRetracted, p, 0)
	e.Reason = reason
	t.events = append(t.events, e)
}

// flushEvents stages the events gathered so far (a range's), so that a
// transaction holds at most one range's events in memory; they are
// numbered when it commits.
func (t *RangeTx) flushEvents(ctx context.Context) error {
	kinds, err := t.tx.AppendEvents(ctx, t.events)
	if err != nil {
		return err
	}
	t.events = t.events[:0]
	for _, k := range kinds {
		t.countEvents(k, 1)
	}
	return nil
}

func (t *RangeTx) countEvents(kind string, n int) {
	if n == 0 {
		return
	}
	if t.totals.Events == nil {
		t.totals.Events = map[string]int{}
	}
	t.totals.Events[kind] += n
}

// MarkPolled records, with the transaction, that the chain was read from
// ago before now and the cursor is left at the finality target (see
// Loop.skip).
func (t *RangeTx) MarkPolled(ctx context.Context, ago time.Duration) error {
	return t.tx.MarkPolled(ctx, t.cur.ID, ago)
}

// PolledAge is how long ago the group last read the chain for this cursor
// (see MarkPolled); ok is false if never.
func (t *RangeTx) PolledAge(ctx context.Context) (time.Duration, bool, error) {
	return t.tx.PolledAge(ctx, t.cur.ID)
}

// Rollback ends the transaction without writing; it is safe after Commit.
func (t *RangeTx) Rollback() {
	if r := t.reading; r != nil {
		t.reading = nil
		r.Stop()
	}
	t.tx.Rollback()
}

// errUsed guards the one-operation-per-transaction rule.
var errUsed = errors.New("range transaction already used")
