package poller_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

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
			if _, err := h.backfill(ctx, poller.BackfillConfig{ID: poller.BackfillID("test", 10, "20"), From: 10, To: 20}); err != nil {
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
		id := poller.BackfillID("test", 10, "30")
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
		cfg := poller.BackfillConfig{ID: poller.BackfillID("test", 10, "30"), From: 10, To: 30, Chunk: 5}
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
	if err := h.store.AgreeOnHook(ctx, "test", theirs, false); err != nil {
		t.Fatal(err)
	}
	h.wcfg.HookDigest = mine

	// The live loop refuses to write and says so.
	l, stop := h.start()
	if err := l.Signals.Failed.Wait(t, 10*time.Second); !errors.Is(err, payments.ErrHookMismatch) {
		t.Fatalf("loop failure = %v, want ErrHookMismatch", err)
	}
	if err := l.Health(); err == nil || err.Error() != "payment hook differs from the group's" {
		t.Fatalf("Health() = %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
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
	if err := h.store.AgreeOnHook(ctx, "test", mine, false); !errors.Is(err, payments.ErrHookMismatch) {
		t.Fatalf("AgreeOnHook = %v, want ErrHookMismatch", err)
	}
	if err := h.store.AgreeOnHook(ctx, "test", mine, true); err != nil {
		t.Fatal(err)
	}
	h.wcfg.IgnoreGroupHook = false
	l, stop = h.start()
	h.waitCursor(20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := l.Health(); err != nil {
		t.Fatalf("Health() = %v after the group took this hook", err)
	}
}
