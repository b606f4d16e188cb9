package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Node is what writers need from the chain; *chain.Endpoints is the real
// one. BurnRange may return a range ending before maxTo (a provider's
// limit); the writer records what it got.
type Node interface {
	Target(ctx context.Context) (chain.Target, error)
	BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (chain.Range, error)
	// Headers returns the canonical headers of blocks ns, in batches; a
	// block the node does not have fails the call.
	Headers(ctx context.Context, ns []uint64) (map[uint64]chain.Header, error)
	// Head returns the header of the node's head (latest).
	Head(ctx context.Context) (chain.Header, error)
	// HintDensity tells how many logs the ledger holds over a span of blocks.
	HintDensity(blocks uint64, logs int)
	// Span is how many blocks the next range should ask for: what the node
	// learned of the provider's limit and the chain's log density.
	Span() uint64
}

// WriterConfig is what every writer of one group shares.
type WriterConfig struct {
	ChainID uint64
	// Contracts are the burn contracts the group follows (one or more),
	// read with one eth_getLogs filter under one cursor.
	Contracts []common.Address
	// MaxBlockRange is the most blocks one eth_getLogs call asks for; the
	// node sizes ranges within it (chain.EndpointsConfig).
	MaxBlockRange uint64
	LockWait      time.Duration
	TxTimeout     time.Duration
	// Hook, if set, runs for every newly inserted payment in its transaction.
	Hook *payments.Hook
	// HookDigest is payments.HookDigest of the hook's statement ("" for none).
	HookDigest string
	// IgnoreGroupHook lets this writer record with another hook than the
	// one recorded for the contract (a backfill told so); others refuse to
	// write.
	IgnoreGroupHook bool
	// Group, if set, is the live group this writer's contracts make up:
	// each transaction on its cursor keeps the group's recorded contracts
	// in step with Contracts (see payments.Tx.SyncMembers).
	Group *GroupConfig
}

// GroupConfig names a live group's cursor and its contracts' first blocks.
type GroupConfig struct {
	CursorID string
	// DefaultID says CursorID is the default one (<chain id>:<first
	// contract>), not CURSOR_ID: start-up finds the group by its recorded
	// contracts instead (see ResolveGroup).
	DefaultID bool
	// FirstBlocks are the first blocks of Contracts, in the same order.
	FirstBlocks []int64
	// AllowRemoval lets this writer stop the group following a contract
	// its Contracts lack (ALLOW_CONTRACT_REMOVAL); otherwise it refuses to
	// write.
	AllowRemoval bool
}

// Writer is the one way anything reaches the ledger: every payment, rejected
// log and cursor move goes through a RangeTx it begins. The live loop, its
// catch-up, backfills, rescans and cursor resets all use it. It is safe for
// concurrent use.
type Writer struct {
	cfg     WriterConfig
	store   *payments.Store
	node    Node
	metrics *Metrics
	log     *slog.Logger
	hinted  atomic.Bool
	// window is the last window of ranges in flight (see prefetcher), with
	// which the next transaction starts.
	window atomic.Int32
	// ahead is the read a committed transaction kept for the next one on
	// its cursor (see readAhead).
	aheadMu sync.Mutex
	ahead   *rangeReader
	// hashes are canonical hashes read for the next transaction's ledger
	// check (see FetchHashes).
	hashesMu sync.Mutex
	hashes   map[int64]string
	// careful makes the inserts of the next transaction check each row for
	// a recorded key, until one commits (see RangeTx.insert).
	careful atomic.Bool
}

// NewWriter returns the writer of a group. metrics may be nil.
func NewWriter(cfg WriterConfig, store *payments.Store, node Node, metrics *Metrics, log *slog.Logger) *Writer {
	return &Writer{cfg: cfg, store: store, node: node, metrics: metrics, log: log}
}

// BatchBudget is how long one transaction keeps recording ranges while
// behind: long enough to save commits and lock hand-overs, short enough that
// a failure loses little and the transaction stays far from TX_TIMEOUT.
func (w *Writer) BatchBudget() time.Duration {
	return min(w.cfg.TxTimeout/4, 2*time.Second)
}

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

// hashOf is block n's canonical hash, from the node.
func (w *Writer) hashOf(ctx context.Context, n int64) (string, error) {
	hs, err := w.node.Headers(ctx, []uint64{nodeBlock(n)})
	if err != nil {
		return "", fmt.Errorf("reading block %d from the node: %w", n, err)
	}
	return hashHex(hs[nodeBlock(n)].Hash), nil
}

// finalHash is block n's canonical hash when the node can prove it final
// (n at or below the finality target), with final false otherwise; ""
// before genesis.
func (w *Writer) finalHash(ctx context.Context, n int64) (hash string, final bool, err error) {
	if n < 0 {
		return "", true, nil
	}
	target, err := w.node.Target(ctx)
	if err != nil {
		return "", false, fmt.Errorf("reading the target: %w", err)
	}
	if n > target.Block {
		return "", false, nil
	}
	hash, err = w.hashOf(ctx, n)
	return hash, err == nil, err
}

// contracts are the contracts the writer records, as the ledger spells them.
func (w *Writer) contracts() []string { return lowerHexes(w.cfg.Contracts) }

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

// recorded is what recording one range did.
type recorded struct {
	logs, rejected       int
	inserted, duplicates int64
}

// record checks the ledger's rows of contracts in r's blocks against the
// canonical chain, then inserts r's payments and rejected logs and runs the
// payment hook for the new payments, inside the transaction. r holds the
// burns of contracts, and of no other.
func (t *RangeTx) record(ctx context.Context, r chain.Range, contracts []string) (recorded, error) {
	ps, err := toPayments(t.w.cfg.ChainID, r.Burns)
	if err != nil {
		return recorded{}, err
	}
	// One writer of a contract records at a time, so that the check below
	// sees what another writer (a backfill beside the live loop) committed
	// for the same blocks; it waits at most LOCK_WAIT.
	if err := t.lockWriters(ctx); err != nil {
		return recorded{}, err
	}
	known, err := t.checkLedger(ctx, r, ps, contracts)
	if err != nil {
		return recorded{}, err
	}
	// The burns seen at the head that these blocks settle leave
	// pending_payments here: those the chain holds where they were seen
	// become payments (their confirmed events below say so), the others are
	// retracted.
	if err := t.settlePending(ctx, r, ps, contracts); err != nil {
		return recorded{}, err
	}
	if len(r.Rejected) > 0 {
		rs, err := toRejected(t.w.cfg.ChainID, r.Rejected)
		if err != nil {
			return recorded{}, err
		}
		if _, err := t.tx.InsertRejected(ctx, rs); err != nil {
			return recorded{}, err
		}
		for _, rj := range r.Rejected {
			t.w.log.Error("burn-event log does not decode; recorded in rejected_logs, not credited",
				slog.String("tx", rj.Log.TxHash.Hex()), slog.Uint64("log_index", uint64(rj.Log.Index)),
				slog.Uint64("block", rj.Log.BlockNumber), slog.String("reason", rj.Reason))
		}
	}
	// The retractions first, then the confirmed events InsertPayments
	// records with the payments.
	if err := t.flushEvents(ctx); err != nil {
		return recorded{}, err
	}
	ins, err := t.insert(ctx, ps, known)
	if err != nil {
		return recorded{}, err
	}
	// The application's side effect commits with the payments or not at
	// all; duplicates trigger nothing.
	if err := t.tx.RunHook(ctx, t.w.cfg.Hook, ins); err != nil {
		return recorded{}, err
	}
	t.note.Add(ins)
	t.countEvents(payments.KindConfirmed, len(ins)) // recorded with the payments
	return recorded{logs: len(r.Burns), rejected: len(r.Rejected), inserted: int64(len(ins)), duplicates: int64(len(ps) - len(ins))}, nil
}

// insert records the payments of ps the ledger does not hold yet (known
// are those it holds, as checkLedger found them under the writers' lock):
// copied, without ON CONFLICT's check before each row. A payment recorded
// after all fails the transaction, which is retried with the check for
// every range of the next transactions until one commits (a defect in what
// the writer read, logged once), never recording a burn twice. (Were the
// check kept for the next insert alone, a transaction that failed at its
// k-th range would spend it on its first range when retried, and fail
// again at the k-th.)
func (t *RangeTx) insert(ctx context.Context, ps []payments.Payment, known map[payments.Key]bool) ([]payments.Inserted, error) {
	if t.careful {
		return t.tx.InsertPayments(ctx, ps)
	}
	fresh := ps
	if len(known) > 0 {
		fresh = make([]payments.Payment, 0, len(ps))
		for _, p := range ps {
			if !known[p.Key()] {
				fresh = append(fresh, p)
			}
		}
	}
	ins, err := t.tx.InsertNewPayments(ctx, fresh)
	if errors.Is(err, payments.ErrRecorded) {
		t.w.careful.Store(true)
		t.w.log.Error("a payment the ledger check found new is recorded already; the range is recorded again, checking each row", slog.Any("err", err))
	}
	return ins, err
}

// pendingState is what a range transaction knows of the pending rows of
// the contracts it holds the writer lock of.
type pendingState int

const (
	pendingUnknown pendingState = iota // not looked, or put since
	pendingNone
	pendingSome
)

// settlePending removes the pending rows of r's blocks and of r's burns and
// retracts those whose position (block hash) r does not hold.
func (t *RangeTx) settlePending(ctx context.Context, r chain.Range, ps []payments.Payment, contracts []string) error {
	if none, err := t.nonePending(ctx, contracts); none || err != nil {
		return err
	}
	from, to := ends(r)
	taken, err := t.tx.TakePending(ctx, t.w.cfg.ChainID, contracts, from, to, ps)
	if err != nil {
		return err
	}
	if len(taken) == 0 {
		return nil
	}
	type position struct {
		key   payments.Key
		block string
	}
	onChain := make(map[position]bool, len(ps))
	for _, p := range ps {
		onChain[position{p.Key(), p.BlockHash}] = true
	}
	for _, p := range taken {
		if !onChain[position{p.Key(), p.BlockHash}] {
			t.retract(p.Payment, "")
		}
	}
	return nil
}

// nonePending says that pending_payments holds no row of contracts, as the
// transaction found when it first asked, holding the writer lock of all of
// them (the group's contracts; a rescan's may be others). It asks once per
// transaction, and again after the transaction put pending rows.
func (t *RangeTx) nonePending(ctx context.Context, contracts []string) (bool, error) {
	locked := t.w.contracts()
	if !t.writing || !isSubset(contracts, locked) {
		return false, nil
	}
	if t.pending == pendingUnknown {
		some, err := t.tx.AnyPending(ctx, t.w.cfg.ChainID, locked)
		if err != nil {
			return false, err
		}
		t.pending = pendingNone
		if some {
			t.pending = pendingSome
		}
	}
	return t.pending == pendingNone, nil
}

// isSubset says whether every element of a is in b.
func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// putPending records ps as pending, under the writer lock.
func (t *RangeTx) putPending(ctx context.Context, ps []payments.Payment) error {
	t.pending = pendingUnknown
	return t.tx.PutPending(ctx, ps)
}

// checkLedger compares what the ledger already holds for r's blocks, and
// for r's transactions wherever they were recorded, with the canonical
// burns ps. A row whose block the chain no longer holds (another block
// hash), whatever else differs, is a finality violation: inserting r would
// record a burn twice under two keys, or leave a row of a dropped branch
// standing as if canonical. A row whose block is still canonical but that r
// contradicts (a key r lacks, other values, the transaction elsewhere) means
// the node's answer is wrong, not the chain: a bad reply, retried elsewhere.
// It returns the keys of ps the ledger holds already, as ps has them.
func (t *RangeTx) checkLedger(ctx context.Context, r chain.Range, ps []payments.Payment, contracts []string) (known map[payments.Key]bool, err error) {
	txs := make([]string, 0, len(ps))
	canonical := make(map[payments.Key]*payments.Payment, len(ps))
	byTx := make(map[string]*payments.Payment, len(ps))
	for i := range ps {
		p := &ps[i]
		canonical[p.Key()] = p
		if _, seen := byTx[p.TxHash]; !seen {
			byTx[p.TxHash] = p
			txs = append(txs, p.TxHash)
		}
	}
	from, to := ends(r)
	rows, err := t.tx.LedgerRows(ctx, t.w.cfg.ChainID, contracts, from, to, txs)
	if err != nil {
		return nil, err
	}
	known = make(map[payments.Key]bool, len(rows))
	for i := range rows {
		row := &rows[i]
		c, ok := canonical[row.Key()]
		if ok && samePayment(row.Payment, *c) {
			known[row.Key()] = true
			continue
		}
		if !ok {
			c = byTx[row.TxHash] // the same transaction elsewhere, if at all
		}
		chainHash, err := t.canonicalHash(ctx, r, row.BlockNumber)
		if err != nil {
			return nil, fmt.Errorf("checking payment %d against the chain: %w", row.ID, err)
		}
		if chainHash == row.BlockHash {
			return nil, fmt.Errorf("%w: payment %d (tx %s log %d) is in block %d, which is still canonical (%s), but the node's reply for blocks [%d, %d] does not hold it as recorded",
				chain.ErrBadReply, row.ID, row.TxHash, row.LogIndex, row.BlockNumber, chainHash, r.From.Number, r.To.Number)
		}
		return nil, &ViolationError{Cursor: t.cur, Block: row.BlockNumber, Committed: row.BlockHash, ChainHash: chainHash,
			SeenAt: ledgerBlock(r.To.Number), Payment: row, OnChain: c}
	}
	return known, nil
}

func samePayment(a, b payments.Payment) bool {
	return a.ChainID == b.ChainID && a.Contract == b.Contract && a.BlockNumber == b.BlockNumber &&
		a.BlockHash == b.BlockHash && a.Payer == b.Payer && a.Digest == b.Digest && a.Amount.Cmp(b.Amount) == 0 &&
		a.BurnedAt.Equal(b.BurnedAt)
}

// errNeedHashes says a check needs canonical hashes the writer must read
// from the node first: the transaction, which holds the writers' lock,
// never waits on the node for them. It rolls back; the writer reads them
// (FetchHashes) and the next transaction finds them.
type errNeedHashes struct{ blocks []int64 }

func (e *errNeedHashes) Error() string {
	return fmt.Sprintf("the ledger check needs the canonical hashes of blocks %v, read before the next attempt", e.blocks)
}

// NeedsHashes reports whether err asks for canonical hashes to be read
// before the transaction is tried again (see FetchHashes).
func NeedsHashes(err error) bool {
	var need *errNeedHashes
	return errors.As(err, &need)
}

// FetchHashes reads, outside any transaction, the canonical hashes err
// asked for (NeedsHashes), for the next transaction's check to use once.
func (w *Writer) FetchHashes(ctx context.Context, err error) error {
	var need *errNeedHashes
	if !errors.As(err, &need) {
		return nil
	}
	hashes := map[int64]string{}
	if err := w.canonicalHashes(ctx, need.blocks, hashes); err != nil {
		return err
	}
	w.hashesMu.Lock()
	defer w.hashesMu.Unlock()
	if w.hashes == nil {
		w.hashes = map[int64]string{}
	}
	maps.Copy(w.hashes, hashes)
	return nil
}

// knownHash is a canonical hash FetchHashes read, used once.
func (w *Writer) knownHash(n int64) (string, bool) {
	w.hashesMu.Lock()
	defer w.hashesMu.Unlock()
	h, ok := w.hashes[n]
	delete(w.hashes, n)
	return h, ok
}

// canonicalHash is block n's hash on the chain now: from r when it holds
// it, else one FetchHashes read before this transaction; otherwise an
// errNeedHashes, and nothing is written.
func (t *RangeTx) canonicalHash(_ context.Context, r chain.Range, n int64) (string, error) {
	switch from, to := ends(r); n {
	case from:
		return hashHex(r.From.Hash), nil
	case to:
		return hashHex(r.To.Hash), nil
	}
	for _, b := range r.Burns {
		if ledgerBlock(b.BlockNumber) == n {
			return hashHex(b.BlockHash), nil
		}
	}
	if h, ok := t.w.knownHash(n); ok {
		return h, nil
	}
	// A block the node does not have is an error, retried: a payment is
	// never judged on a missing answer.
	return "", &errNeedHashes{blocks: []int64{n}}
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
