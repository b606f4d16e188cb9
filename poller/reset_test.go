package poller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

func TestResetRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name      string
		to        int64
		opts      poller.ResetOptions
		wantErr   error
		wantBlock int64
	}{
		{"backwards", 5, poller.ResetOptions{}, nil, 5},
		{"to before genesis", -1, poller.ResetOptions{}, nil, -1},
		{"same block", 12, poller.ResetOptions{}, nil, 12},
		{"forward is refused", 15, poller.ResetOptions{}, poller.ErrSkipRefused, 12},
		{"forward when allowed", 15, poller.ResetOptions{AllowSkip: true}, nil, 15},
		{"beyond the target is refused", 21, poller.ResetOptions{AllowSkip: true}, poller.ErrBeyondTarget, 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			node := newFakeChain(20)
			h := newHarness(t, node)
			w := h.writer()
			if _, err := h.store.SeedCursor(ctx, "c", 12, node.hash(12).Hex()); err != nil {
				t.Fatal(err)
			}
			res, err := w.Reset(ctx, "c", tt.to, tt.opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Reset = %v, want %v", err, tt.wantErr)
			}
			c := h.cursorOf("c")
			wantHash := ""
			switch {
			case tt.wantBlock == 12:
				wantHash = node.hash(12).Hex()
			case tt.wantBlock >= 0:
				wantHash = node.hash(uint64(tt.wantBlock)).Hex()
			}
			if c.Block != tt.wantBlock || c.Hash != wantHash {
				t.Fatalf("cursor = %d/%s, want %d/%s", c.Block, c.Hash, tt.wantBlock, wantHash)
			}
			if err == nil && (res.From.Block != 12 || res.To != tt.to || res.Hash != wantHash || res.DBUser == "") {
				t.Fatalf("result = %+v", res)
			}
		})
	}
}

func TestResetRefusesWhileTheCursorIsLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	h := newHarness(t, node)
	if _, err := h.store.SeedCursor(ctx, "c", 12, ""); err != nil {
		t.Fatal(err)
	}
	holder, err := h.store.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.writer().Reset(ctx, "c", 5, poller.ResetOptions{}); !errors.Is(err, poller.ErrCursorLocked) {
		t.Fatalf("Reset = %v, want ErrCursorLocked", err)
	}
	if c := h.cursorOf("c"); c.Block != 12 {
		t.Fatalf("a refused reset moved the cursor to %d", c.Block)
	}
}

// TestResetMarksTheOrphanedBranch: after a violation, the operator's reset
// marks the payments of blocks the chain dropped as orphaned (they stay), so
// that the writers do not latch again on them, and the new branch is
// recorded; verify then counts them as orphaned, not as discrepancies.
func TestResetMarksTheOrphanedBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(12)
	kept := node.addBurn(3, 1, 0, 5)
	node.addBurn(7, 2, 0, 6)
	node.addBurn(8, 3, 0, 7)
	h := newHarness(t, node)
	l, stop := h.start()
	h.waitCursor(12)

	node.reorg(6)
	fresh := node.addBurn(9, 4, 0, 8)
	node.setTarget(20)
	_ = l.Signals.Latched.Wait(t, 10*time.Second)

	res, err := h.writer().Reset(ctx, h.lcfg.CursorID, 5, poller.ResetOptions{MarkOrphaned: true})
	if err != nil {
		t.Fatal(err)
	}
	var orphanedBlocks []int64
	for _, r := range res.Orphaned {
		orphanedBlocks = append(orphanedBlocks, r.BlockNumber)
	}
	if len(orphanedBlocks) != 2 || orphanedBlocks[0] != 7 || orphanedBlocks[1] != 8 {
		t.Fatalf("orphaned payments at blocks %v, want 7 and 8", orphanedBlocks)
	}
	l.Signals.Cleared.Wait(t, 10*time.Second)
	h.waitCursor(20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if l.Violation() != "" {
		t.Fatalf("latched again: %s", l.Violation())
	}
	var live, orphaned []string
	rows, err := h.pool.Query(ctx, `SELECT tx_hash, orphaned_at IS NOT NULL FROM payments ORDER BY block_number`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tx string
		var o bool
		if err := rows.Scan(&tx, &o); err != nil {
			t.Fatal(err)
		}
		if o {
			orphaned = append(orphaned, tx)
		} else {
			live = append(live, tx)
		}
	}
	rows.Close()
	if strings.Join(live, ",") != kept.TxHash.Hex()+","+fresh.TxHash.Hex() || len(orphaned) != 2 {
		t.Fatalf("live payments %v, orphaned %v; want the kept and the new branch's live, two orphaned", live, orphaned)
	}
	rep, err := h.verifier().Verify(ctx, 0, 20, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.Orphaned != 2 || rep.ChainBurns != 2 {
		t.Fatalf("verify after the reset = %+v, want clean with 2 orphaned", rep)
	}
}

// TestResetNeverAsksTheNodeHoldingTheWritersLock: a cursor reset that
// marks orphaned payments reads the canonical hashes of the ledger's blocks
// above --to before it locks; a writer records another block in between.
// The reset does not ask the node for that block's hash while it holds the
// contract's writers' lock (every other writer of the contract would wait
// on the node with it): it rolls back, reads the hash with no lock held and
// starts again. Every Headers call finds no writers' lock held in the
// ledger's database (no row of writer_locks locked, no advisory lock); the reset ends at --to with nothing orphaned and the
// ledger as it was.
func TestResetNeverAsksTheNodeHoldingTheWritersLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(10)
	want := expected(node.addBurn(3, 1, 0, 5), node.addBurn(7, 2, 0, 6), node.addBurn(14, 3, 0, 7))
	h := newHarness(t, node)
	if _, err := h.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pgrowlocks`); err != nil {
		t.Fatal(err)
	}
	live := h.writer()
	if _, err := live.Seed(ctx, "test", -1); err != nil {
		t.Fatal(err)
	}
	if res := advance(t, live, node, "test"); res.To != 10 || res.Inserted != 2 {
		t.Fatalf("first advance: %+v", res)
	}
	node.setTarget(20)
	var (
		mu     sync.Mutex
		asked  [][]uint64
		held   []string
		before sync.Once
	)
	node.headersHook = func(ns []uint64) {
		var n int
		if err := h.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
			+ (SELECT count(*) FROM pgrowlocks('writer_locks'))`).Scan(&n); err != nil {
			t.Error(err)
		}
		mu.Lock()
		asked = append(asked, slices.Clone(ns))
		if n > 0 {
			held = append(held, fmt.Sprint(ns))
		}
		mu.Unlock()
		if !slices.Contains(ns, 7) {
			return // the hash of --to's block
		}
		// After the reset's read before the lock, the live writer records
		// block 14.
		before.Do(func() {
			if res := advance(t, live, node, "test"); res.To != 20 || res.Inserted != 1 {
				t.Errorf("advance between the reset's read and its lock: %+v", res)
			}
		})
	}
	res, err := h.writer().Reset(ctx, "test", 5, poller.ResetOptions{MarkOrphaned: true})
	node.headersHook = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 0 {
		t.Fatalf("the node was asked for blocks %v while a writers' lock was held", held)
	}
	if len(res.Orphaned) != 0 || res.To != 5 || h.cursorOf("test").Block != 5 {
		t.Fatalf("reset = %+v, cursor %d; want at 5 with nothing orphaned", res, h.cursorOf("test").Block)
	}
	if got := fmt.Sprint(asked); !strings.Contains(got, "[14]") {
		t.Fatalf("headers asked %s; want block 14's read on its own, after the writer recorded it", got)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
}

func TestBackfillIDFitsACursorID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("g", 200)
	a1 := common.HexToAddress("0x00000000000000000000000000000000000000a1")
	b2 := common.HexToAddress("0x00000000000000000000000000000000000000b2")
	one := []common.Address{a1}
	tests := []struct {
		name, group, to string
		contracts       []common.Address
		from            int64
		want            string
	}{
		{"the default group of one contract", "1337:0x00000000000000000000000000000000000000a1", "90", one, 10,
			"backfill:1337:0x00000000000000000000000000000000000000a1:10-90"},
		{"finalized", "1337:0x00000000000000000000000000000000000000a1", "finalized", one, 0,
			"backfill:1337:0x00000000000000000000000000000000000000a1:0-finalized"},
		// Another contract set is another backfill, whatever the order.
		{"two contracts", "1337:0x00000000000000000000000000000000000000a1", "90", []common.Address{a1, b2}, 10,
			"backfill:1337:0x00000000000000000000000000000000000000a1+" + contractsTag(a1, b2) + ":10-90"},
		{"the same two, listed the other way", "1337:0x00000000000000000000000000000000000000a1", "90", []common.Address{b2, a1}, 10,
			"backfill:1337:0x00000000000000000000000000000000000000a1+" + contractsTag(a1, b2) + ":10-90"},
		{"a named group", "g", "90", one, 10, "backfill:g+" + contractsTag(a1) + ":10-90"},
	}
	for _, tt := range tests {
		if got := poller.BackfillID(tt.group, tt.contracts, tt.from, tt.to); got != tt.want {
			t.Errorf("%s: BackfillID = %q, want %q", tt.name, got, tt.want)
		}
	}
	if poller.BackfillID("g", one, 10, "90") == poller.BackfillID("g", []common.Address{b2}, 10, "90") {
		t.Fatal("two contracts of one named group share a backfill id")
	}
	a := poller.BackfillID(long, one, 10, "90")
	b := poller.BackfillID(long, one, 10, "91")
	if len(a) > 200 || len(b) > 200 || a == b || a != poller.BackfillID(long, one, 10, "90") {
		t.Fatalf("long ids %q (%d) and %q (%d): want distinct, stable, at most 200 characters", a, len(a), b, len(b))
	}
	// And the ledger accepts it: a backfill with a long group id works.
	node := newFakeChain(20)
	want := expected(node.addBurn(12, 1, 0, 5))
	h := newHarness(t, node)
	if _, err := h.backfill(context.Background(), poller.BackfillConfig{ID: a, From: 10, To: 20}); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
}

func TestSeedTakesTheCanonicalHashWhenFinal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	h := newHarness(t, node)
	w := h.writer()
	tests := []struct {
		id       string
		block    int64
		wantHash string
	}{
		{"genesis", -1, ""},
		{"final", 19, node.hash(19).Hex()},
		{"at the target", 20, node.hash(20).Hex()},
		{"beyond the target", 21, ""},
	}
	for _, tt := range tests {
		c, err := w.Seed(ctx, tt.id, tt.block)
		if err != nil {
			t.Fatal(err)
		}
		if c.Block != tt.block || c.Hash != tt.wantHash {
			t.Errorf("%s: seeded %d/%q, want %d/%q", tt.id, c.Block, c.Hash, tt.block, tt.wantHash)
		}
	}
	// An existing cursor is left as it is.
	if c, err := w.Seed(ctx, "final", 5); err != nil || c.Block != 19 {
		t.Fatalf("Seed of an existing cursor = %d, %v; want it left at 19", c.Block, err)
	}
}

// TestResetToTheCursorBlockClearsALedgerViolation: when the violation is a
// payment above the cursor (a backfill recorded blocks the chain then
// dropped), the operator resets the cursor to where it is; the reset marks
// the payment orphaned and the loop resumes.
func TestResetToTheCursorBlockClearsALedgerViolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	node.addBurn(15, 1, 0, 5)
	h := newHarness(t, node)
	if _, err := h.writer().Seed(ctx, h.lcfg.CursorID, 9); err != nil {
		t.Fatal(err)
	}
	if _, err := h.backfill(ctx, poller.BackfillConfig{ID: "b", From: 10, To: 20}); err != nil {
		t.Fatal(err)
	}
	node.reorg(12)
	fresh := node.addBurn(16, 2, 0, 6)
	node.setTarget(30)
	l, stop := h.start()
	_ = l.Signals.Latched.Wait(t, 10*time.Second)
	res, err := h.writer().Reset(ctx, h.lcfg.CursorID, 9, poller.ResetOptions{MarkOrphaned: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphaned) != 1 || res.Orphaned[0].BlockNumber != 15 {
		t.Fatalf("orphaned = %+v, want the payment at block 15", res.Orphaned)
	}
	l.Signals.Cleared.Wait(t, 10*time.Second)
	h.waitCursor(30)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rows, err := h.store.PaymentsInBlocks(ctx, 1337, []string{"0x00000000000000000000000000000000000000b1"}, 0, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].Orphaned || rows[1].Orphaned || rows[1].TxHash != fresh.TxHash.Hex() {
		t.Fatalf("ledger = %+v, want the orphaned row at 15 and the new branch's at 16", rows)
	}
}

// contractsTag is the hash BackfillID gives a contract set: 8 hex digits
// of the sha256 of the sorted, comma-joined lowercase addresses.
func contractsTag(cs ...common.Address) string {
	set := make([]string, len(cs))
	for i, c := range cs {
		set[i] = strings.ToLower(c.Hex())
	}
	slices.Sort(set)
	sum := sha256.Sum256([]byte(strings.Join(set, ",")))
	return hex.EncodeToString(sum[:4])
}
