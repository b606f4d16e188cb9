package poller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

// TestARowTheChainContradictsIsAViolation: whichever writer records a range
// (here the live loop, after a backfill recorded blocks above its cursor),
// rows already in the ledger for that range that the canonical chain does not
// hold are a finality violation: latched, nothing committed, both sides
// reported. Before, the live loop inserted the re-included burn under its new
// key and the payer was credited twice.
func TestARowTheChainContradictsIsAViolation(t *testing.T) {
	t.Parallel()
	tx := common.HexToHash("0x7777")
	tests := []struct {
		name string
		// branch re-includes (or not) the backfilled burn, which was at
		// block 15, log 0, on the old branch.
		branch   func(node *fakeChain)
		maxRange uint64
		// wantOnChain is where the canonical chain has the burn (-1: nowhere).
		wantOnChain int64
	}{
		{"re-included later under another key", func(n *fakeChain) { n.addBurnTx(16, tx, 7, 1, 500) }, 10, 16},
		{"re-included at the same position of the new block", func(n *fakeChain) { n.addBurnTx(15, tx, 7, 0, 500) }, 10, 15},
		{"dropped by the new branch", func(n *fakeChain) {}, 10, -1},
		// The live range [10, 13] holds no ledger row; the transaction is
		// found recorded at block 15 by its hash.
		{"re-included earlier, outside the range holding the row", func(n *fakeChain) { n.addBurnTx(13, tx, 7, 0, 500) }, 4, 13},
		{"re-included with another amount", func(n *fakeChain) { n.addBurnTx(15, tx, 7, 0, 501) }, 10, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			node := newFakeChain(20)
			node.addBurnTx(15, tx, 7, 0, 500)
			h := newHarness(t, node)
			h.wcfg.MaxBlockRange = tt.maxRange
			w := h.writer()
			// The live cursor at 9, with block 9's hash.
			if _, err := w.Seed(ctx, h.lcfg.CursorID, 9); err != nil {
				t.Fatal(err)
			}
			if _, err := h.backfill(ctx, poller.BackfillConfig{ID: poller.BackfillID("test", []common.Address{burnContract}, 10, "20"), From: 10, To: 20}); err != nil {
				t.Fatal(err)
			}
			before := h.ledger()
			if len(before) != 1 {
				t.Fatalf("ledger after the backfill = %v", before)
			}

			node.reorg(12)
			tt.branch(node)
			node.setTarget(30)
			l, stop := h.start()
			v := l.Signals.Latched.Wait(t, 10*time.Second)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if v.Payment == nil || v.Payment.TxHash != tx.Hex() || v.Payment.BlockNumber != 15 || v.Block != 15 {
				t.Fatalf("violation = %v; want the payment of tx %s at block 15", v, tx.Hex())
			}
			if v.ChainHash != node.hash(15).Hex() || v.Committed == v.ChainHash {
				t.Fatalf("violation hashes: committed %s, chain %s; want the chain's %s", v.Committed, v.ChainHash, node.hash(15).Hex())
			}
			switch {
			case tt.wantOnChain < 0 && v.OnChain != nil:
				t.Fatalf("violation names the chain's side %+v; the chain has no such burn", v.OnChain)
			case tt.wantOnChain >= 0 && (v.OnChain == nil || v.OnChain.BlockNumber != tt.wantOnChain):
				t.Fatalf("violation's chain side = %+v, want the burn at block %d", v.OnChain, tt.wantOnChain)
			}
			if got := l.Violation(); got != "finality violation at block 15" {
				t.Fatalf("Violation() = %q", got)
			}
			// Nothing of the violating range was committed.
			if got := h.ledger(); !slices.Equal(got, before) {
				t.Fatalf("ledger changed: %v, want %v", got, before)
			}
			if c := h.cursor(); c.Block != 9 {
				t.Fatalf("live cursor moved to %d", c.Block)
			}
		})
	}
}

// TestBackfillChecksContinuity: a backfill cursor is seeded with block
// from-1's canonical hash and every chunk continues the last, like the live
// loop: a reorganisation under a backfill is a violation, not a second key.
func TestBackfillChecksContinuity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("seeded with the hash of from-1", func(t *testing.T) {
		t.Parallel()
		node := newFakeChain(40)
		h := newHarness(t, node)
		id := poller.BackfillID("test", []common.Address{burnContract}, 10, "30")
		if _, err := h.writer().Seed(ctx, id, 9); err != nil {
			t.Fatal(err)
		}
		if c := h.cursorOf(id); c.Block != 9 || c.Hash != node.hash(9).Hex() {
			t.Fatalf("backfill cursor seeded at %d/%s, want 9/%s", c.Block, c.Hash, node.hash(9).Hex())
		}
		node.reorg(5)
		node.addBurn(20, 1, 0, 5)
		_, err := h.backfill(ctx, poller.BackfillConfig{ID: id, From: 10, To: 30})
		var v *poller.ViolationError
		if !errors.As(err, &v) || v.Block != 9 || v.SeenAt != 10 {
			t.Fatalf("Backfill = %v, want a violation at block 9 seen at 10", err)
		}
		if got := h.ledger(); len(got) != 0 {
			t.Fatalf("ledger = %v, want nothing recorded", got)
		}
	})
	t.Run("each chunk continues the last", func(t *testing.T) {
		t.Parallel()
		node := newFakeChain(40)
		h := newHarness(t, node)
		cfg := poller.BackfillConfig{ID: poller.BackfillID("test", []common.Address{burnContract}, 10, "30"), From: 10, To: 30, Chunk: 5}
		ctx, cancel := context.WithCancel(ctx)
		node.hook = func(_ context.Context, from, _ uint64) {
			if from == 15 {
				cancel() // stop after the first chunk, [10, 14]
			}
		}
		if _, err := h.backfill(ctx, cfg); !errors.Is(err, poller.ErrInterrupted) {
			t.Fatalf("Backfill = %v, want interrupted", err)
		}
		node.hook = nil
		c := h.cursorOf(cfg.ID)
		node.reorg(12)
		_, err := h.backfill(context.Background(), cfg)
		var v *poller.ViolationError
		if !errors.As(err, &v) || v.Block != c.Block || v.Committed != c.Hash {
			t.Fatalf("resumed Backfill = %v, want a violation at its cursor %d", err, c.Block)
		}
		if after := h.cursorOf(cfg.ID); after.Block != c.Block {
			t.Fatalf("backfill cursor moved from %d to %d", c.Block, after.Block)
		}
	})
}

// TestHookAgreement: writers of one group must agree on the payment hook.
func TestHookAgreement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	want := expected(node.addBurn(3, 1, 0, 5))
	h := newHarness(t, node)
	mine, theirs := payments.HookDigest("SELECT 1"), payments.HookDigest("SELECT 2")
	if err := h.store.AgreeOnHook(ctx, 1337, contractHex, theirs, false); err != nil {
		t.Fatal(err)
	}
	h.wcfg.HookDigest = mine

	// The live loop refuses to write and says so.
	h.assertHookRefused()
	// So does a backfill, unless told to ignore the group's hook.
	cfg := poller.BackfillConfig{ID: "b", From: 0, To: 20}
	if _, err := h.backfill(ctx, cfg); !errors.Is(err, payments.ErrHookMismatch) {
		t.Fatalf("Backfill = %v, want ErrHookMismatch", err)
	}
	if got := h.ledger(); len(got) != 0 {
		t.Fatalf("ledger = %v, want nothing written", got)
	}
	h.wcfg.IgnoreGroupHook = true
	if _, err := h.backfill(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	// A replica told to replace the group's hook takes over; the others
	// then stop writing.
	if err := h.store.AgreeOnHook(ctx, 1337, contractHex, mine, false); !errors.Is(err, payments.ErrHookMismatch) {
		t.Fatalf("AgreeOnHook = %v, want ErrHookMismatch", err)
	}
	if err := h.store.AgreeOnHook(ctx, 1337, contractHex, mine, true); err != nil {
		t.Fatal(err)
	}
	h.wcfg.IgnoreGroupHook = false
	l, stop := h.start()
	h.waitCursor(20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := l.Health(); err != nil {
		t.Fatalf("Health() = %v after the group took this hook", err)
	}
}

// TestWritersOfAContractRecordOneAtATime: a backfill chunk and the live
// loop over the same blocks, in flight together across a reorganisation,
// cannot both commit the burn: the second writer waits for the first, then
// finds its row contradicted by the chain and latches. Before, neither saw
// the other's uncommitted row and the burn was recorded, and credited, twice.
func TestWritersOfAContractRecordOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	tx := common.HexToHash("0x7777")
	node.addBurnTx(15, tx, 7, 0, 500)
	h := newHarness(t, node)
	h.creditEachPayment()
	h.wcfg.LockWait = time.Minute // the live writer waits as long as the backfill holds on
	w := h.writer()
	backfill := poller.BackfillID("test", []common.Address{burnContract}, 10, "20")
	for _, id := range []string{h.lcfg.CursorID, backfill} {
		if _, err := w.Seed(ctx, id, 9); err != nil {
			t.Fatal(err)
		}
	}
	btx, err := w.Begin(ctx, ctx, backfill)
	if err != nil {
		t.Fatal(err)
	}
	defer btx.Rollback()
	if _, err := btx.Advance(ctx, 20, time.Second); err != nil {
		t.Fatal(err)
	}

	// The chain reorganises and re-includes the burn under another key
	// while the backfill's transaction is still open.
	node.reorg(12)
	node.addBurnTx(16, tx, 7, 1, 500)
	ltx, err := w.Begin(ctx, ctx, h.lcfg.CursorID)
	if err != nil {
		t.Fatal(err)
	}
	defer ltx.Rollback()
	live := make(chan error, 1)
	go func() {
		_, err := ltx.Advance(ctx, 20, time.Second)
		live <- err
	}()
	waitFor(t, 10*time.Second, "the live writer waiting for the backfill", func() bool {
		var n int
		err := h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%writer_locks%'`).Scan(&n)
		return err == nil && n == 1
	})
	select {
	case err := <-live:
		t.Fatalf("the live writer recorded beside an open backfill: %v", err)
	default:
	}
	if _, err := btx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The check needs block 15's canonical hash: it is read outside the
	// transaction, which holds the writers' lock, and the live writer
	// tries again, as its loop does.
	err = <-live
	if !poller.NeedsHashes(err) {
		t.Fatalf("live Advance = %v, want it to ask for block 15's hash", err)
	}
	ltx.Rollback()
	if err := w.FetchHashes(ctx, err); err != nil {
		t.Fatal(err)
	}
	ltx, err = w.Begin(ctx, ctx, h.lcfg.CursorID)
	if err != nil {
		t.Fatal(err)
	}
	defer ltx.Rollback()
	_, err = ltx.Advance(ctx, 20, time.Second)
	var v *poller.ViolationError
	if !errors.As(err, &v) || v.Payment == nil || v.Payment.BlockNumber != 15 || v.OnChain == nil || v.OnChain.BlockNumber != 16 {
		t.Fatalf("live Advance = %v, want a violation naming the backfilled row at 15 and the chain's at 16", err)
	}
	var credits int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM credit_log`).Scan(&credits); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); len(got) != 1 || credits != 1 {
		t.Fatalf("ledger %v and %d credits, want the backfill's one row credited once", got, credits)
	}
}

// TestAReincludedBurnUnderItsOldKeyIsRecordedAfterTheReset: after a reset
// marks a burn's row orphaned, the new branch's burn with the same
// (tx, log index) is a payment of its own, credited like any other; the
// orphaned row's credit is the one the business reverses.
func TestAReincludedBurnUnderItsOldKeyIsRecordedAfterTheReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	tx := common.HexToHash("0x7777")
	node.addBurnTx(15, tx, 7, 0, 500)
	h := newHarness(t, node)
	h.creditEachPayment()
	l, stop := h.start()
	h.waitCursor(20)
	node.reorg(12)
	node.addBurnTx(16, tx, 7, 0, 500) // the same key, in another block
	node.setTarget(30)
	_ = l.Signals.Latched.Wait(t, 10*time.Second)
	res, err := h.writer().Reset(ctx, h.lcfg.CursorID, 11, poller.ResetOptions{MarkOrphaned: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphaned) != 1 {
		t.Fatalf("orphaned %+v, want the row at block 15", res.Orphaned)
	}
	l.Signals.Cleared.Wait(t, 10*time.Second)
	h.waitCursor(30)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rows, err := h.store.PaymentsInBlocks(ctx, 1337, []string{contractHex}, 0, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].Orphaned || rows[0].BlockNumber != 15 || rows[1].Orphaned || rows[1].BlockNumber != 16 {
		t.Fatalf("ledger = %+v, want the orphaned row at 15 and a live one at 16", rows)
	}
	var credited []int64
	r, err := h.pool.Query(ctx, `SELECT payment_id FROM credit_log ORDER BY payment_id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var id int64
		if err := r.Scan(&id); err != nil {
			t.Fatal(err)
		}
		credited = append(credited, id)
	}
	r.Close()
	if !slices.Equal(credited, []int64{rows[0].ID, rows[1].ID}) {
		t.Fatalf("credited payments %v, want %d (orphaned) and %d", credited, rows[0].ID, rows[1].ID)
	}
	rep, err := h.verifier().Verify(ctx, 0, 30, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Orphaned != 1 {
		t.Fatalf("verify = %+v, want clean with 1 orphaned", rep)
	}
}

// TestANodeLeavingOutARecordedBurnIsABadReply: a node that omits a log the
// ledger holds, in a block that is still canonical, is wrong, not the
// chain: the transaction fails as a bad reply and is retried; nothing
// latches, and once the node answers fully the group goes on.
func TestANodeLeavingOutARecordedBurnIsABadReply(t *testing.T) {
	t.Parallel()
	node := newFakeChain(30)
	node.addBurn(25, 2, 0, 6)
	h := newHarness(t, node)
	h.lcfg.RescanDepth = 10
	h.lcfg.RescanInterval = time.Millisecond
	l, stop := h.start()
	h.waitCursor(30)
	node.mu.Lock()
	node.hidden[25] = true
	node.mu.Unlock()
	err := l.Signals.Failed.WaitUntil(t, 10*time.Second, func(err error) bool { return errors.Is(err, chain.ErrBadReply) })
	if chain.ClassOf(err) != chain.ClassBadReply || !strings.Contains(err.Error(), "still canonical") {
		t.Fatalf("failure = %v, want a bad reply", err)
	}
	if l.Violation() != "" {
		t.Fatalf("latched on a node's omission: %s", l.Violation())
	}
	node.mu.Lock()
	node.hidden = map[uint64]bool{}
	node.mu.Unlock()
	l.Signals.Rescanned.Wait(t, 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if l.Violation() != "" || len(h.ledger()) != 1 {
		t.Fatalf("violation %q, ledger %v", l.Violation(), h.ledger())
	}
}

// TestAStandbyWithAStaleHookSaysSo: the hook is checked before the wait for
// the cursor, so a replica that never gets the lock reports a hook the
// contract no longer records.
func TestAStandbyWithAStaleHookSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	h := newHarness(t, node)
	if err := h.store.AgreeOnHook(ctx, 1337, contractHex, payments.HookDigest("SELECT 2"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.SeedCursor(ctx, h.lcfg.CursorID, -1, ""); err != nil {
		t.Fatal(err)
	}
	holder, err := h.store.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.LockCursor(ctx, h.lcfg.CursorID); err != nil {
		t.Fatal(err)
	}
	h.wcfg.HookDigest = payments.HookDigest("SELECT 1")
	h.assertHookRefused()
}

// creditEachPayment makes the writers' hook log one credit per payment in
// credit_log (hookSchema).
func (h *harness) creditEachPayment() {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.pool.Exec(ctx, hookSchema); err != nil {
		h.t.Fatal(err)
	}
	hook, err := h.store.PrepareHook(ctx, `INSERT INTO credit_log VALUES ($1, $8, $10)`)
	if err != nil {
		h.t.Fatal(err)
	}
	h.wcfg.Hook = hook
}

// assertHookRefused runs a live loop and checks that it refuses to write
// for a hook the contract does not record, and says so on readiness.
func (h *harness) assertHookRefused() {
	h.t.Helper()
	l, stop := h.start()
	if err := l.Signals.Failed.Wait(h.t, 10*time.Second); !errors.Is(err, payments.ErrHookMismatch) {
		h.t.Fatalf("loop failure = %v, want ErrHookMismatch", err)
	}
	if err := l.Health(); err == nil || err.Error() != "payment hook differs from the group's" {
		h.t.Fatalf("Health() = %v", err)
	}
	if err := stop(); err != nil {
		h.t.Fatal(err)
	}
}

// TestARangeTxDoesOneThing: a range transaction moves its cursor once. A
// second Advance, or a Rescan after an Advance, is refused (its checks
// would run against the hash the cursor had before the first), and the
// transaction still commits what the first did, exactly.
func TestARangeTxDoesOneThing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(10)
	want := expected(node.addBurn(4, 1, 0, 5))
	h := newHarness(t, node)
	w := h.writer()
	if _, err := w.Seed(ctx, "test", -1); err != nil {
		t.Fatal(err)
	}
	tx, err := w.Begin(ctx, ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if res, err := tx.Advance(ctx, 5, time.Minute); err != nil || res.To != 5 {
		t.Fatalf("first Advance = %+v, %v", res, err)
	}
	if _, err := tx.Advance(ctx, 10, time.Minute); !errors.Is(err, poller.ErrUsed) {
		t.Fatalf("second Advance = %v, want refused", err)
	}
	if _, err := tx.Rescan(ctx, 0); !errors.Is(err, poller.ErrUsed) {
		t.Fatalf("Rescan after Advance = %v, want refused", err)
	}
	if res, err := tx.Commit(ctx); err != nil || res.To != 5 || res.Inserted != 1 {
		t.Fatalf("commit = %+v, %v", res, err)
	}
	if c := h.cursorOf("test"); c.Block != 5 || c.Hash != node.hash(5).Hex() {
		t.Fatalf("cursor %+v, want block 5 at its hash", c)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
}

// TestGroupsOnOneChainNeverShareABurnsKey: three groups on one chain follow
// three contracts, each through its own node (their finality settings
// differ, so each sees the chain at another moment). One transaction burns
// on all three, and is included so that its log 7 is group A's burn in A's
// block 12, B's in B's block 13 and C's in C's block 14. Each group records
// its own burn, with its amount, and moves its cursor past it: a log index
// is a place in a block, not a burn's name, and a key without the contract
// let the first group's row stand for the others' burns (skipped as
// duplicates, their cursors moved past them: lost).
func TestGroupsOnOneChainNeverShareABurnsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := common.HexToHash("0x7777")
	pool, _ := pgtest.NewPool(t)
	store := payments.NewStore(pool)
	type group struct {
		contract common.Address
		block    uint64
		amount   int64
		burn     chain.Burn
		node     *fakeChain
		w        *poller.Writer
	}
	groups := []*group{
		{contract: common.HexToAddress("0x00000000000000000000000000000000000000a1"), block: 12, amount: 100},
		{contract: common.HexToAddress("0x00000000000000000000000000000000000000b2"), block: 13, amount: 200},
		{contract: common.HexToAddress("0x00000000000000000000000000000000000000c3"), block: 14, amount: 300},
	}
	for i, g := range groups {
		node := newFakeChain(20)
		g.node = node
		// The transaction's burn on this group's contract is log 7 of
		// this group's block; the others' burns sit elsewhere in it.
		node.addBurnTx(g.block, tx, 7, 7, g.amount)
		node.burns[g.block][0].Contract = g.contract
		other := groups[(i+1)%len(groups)]
		node.addBurnTx(g.block, tx, 7, 8, 1)
		node.burns[g.block][1].Contract = other.contract
		g.burn = node.burns[g.block][0]
		cfg := poller.WriterConfig{ChainID: 1337, Contracts: []common.Address{g.contract}, MaxBlockRange: 10,
			LockWait: 100 * time.Millisecond, TxTimeout: 5 * time.Second}
		g.w = poller.NewWriter(cfg, store, node, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if _, err := g.w.Seed(ctx, g.contract.Hex(), 9); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		if res := advance(t, g.w, g.node, g.contract.Hex()); res.Inserted != 1 || res.Duplicates != 0 || res.To != 20 {
			t.Fatalf("group %s recorded %+v, want its one burn inserted and the cursor at 20", g.contract.Hex(), res)
		}
	}
	rows, err := pool.Query(ctx, `SELECT contract, tx_hash, log_index, block_number, amount::text FROM payments ORDER BY contract`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var contract, txHash, amount string
		var index, block int64
		err := r.Scan(&contract, &txHash, &index, &block, &amount)
		return fmt.Sprintf("%s %s/%d@%d=%s", contract, txHash, index, block, amount), err
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, g := range groups {
		want = append(want, fmt.Sprintf("%s %s/7@%d=%d", strings.ToLower(g.contract.Hex()), tx.Hex(), g.block, g.amount))
		if c, err := store.Cursor(ctx, g.contract.Hex()); err != nil || c.Block != 20 {
			t.Fatalf("cursor of %s = %+v, %v; want 20", g.contract.Hex(), c, err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
