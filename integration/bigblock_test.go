package integration

import (
	"context"
	"math/big"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// TestABlockOfTenThousandBurns: one block holds 10,000 burns (100
// transactions of 100 through the BatchBurner, 20,000 logs and about 12.6
// MB of receipts, over the 8 MiB reply cap, and its hundred transaction
// receipts together over it too), the first block with burns, blocks of a
// few burns after it. A replica with the defaults (every burn checked
// against its receipt) reads it through a node that cuts the first
// receipts reply (the big block's) short midway, records every burn with
// its exact amount (a hundred of them above 10^30), and moves its cursor
// past it; the cut reply fails one poll, logged once.
//
// The budgets are wide: under -race the node (in this process) serves the
// block's receipts three times over, about 38 MB, and the poll that records
// them takes 20-40 s alone on two cores, more beside other packages' tests
// (a TX_TIMEOUT of 60s timed out on CI). Built without -race, the same poll
// takes about 2 s.
func TestABlockOfTenThousandBurns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 4, GasLimit: 1_500_000_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	info := c.Info()
	few := func() {
		if _, err := c.Burn(ctx, 0, devchain.RandomAmount(), devchain.RandomDigest()); err != nil {
			t.Fatal(err)
		}
		c.Seal()
	}
	huge := new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)
	for tx := range 100 {
		amounts, digests := make([]*big.Int, 100), make([][32]byte, 100)
		digest := devchain.RandomDigest() // a transaction's burns share a digest
		for i := range amounts {
			amounts[i], digests[i] = devchain.RandomAmount(), digest
			if tx == 0 {
				amounts[i] = new(big.Int).Add(huge, big.NewInt(int64(i)))
			}
		}
		if _, err := c.BurnMany(ctx, tx%4, amounts, digests); err != nil {
			t.Fatal(err)
		}
	}
	// The pool promotes transactions in the background: seal once every
	// payer's 25 are pending, so that one block takes the 100.
	waitFor(t, time.Minute, "the 100 transactions pending", func() bool {
		for i := range 4 {
			mined, err := c.Client().NonceAt(ctx, c.Payer(i), nil)
			if err != nil {
				t.Fatal(err)
			}
			pending, err := c.Client().PendingNonceAt(ctx, c.Payer(i))
			if err != nil {
				t.Fatal(err)
			}
			if pending-mined != 25 {
				return false
			}
		}
		return true
	})
	c.Seal()
	head, err := c.Client().BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := c.Client().BlockByNumber(ctx, new(big.Int).SetUint64(head))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(blk.Transactions()); n != 100 {
		t.Fatalf("block %d holds %d transactions, want the 100 of 10,000 burns", head, n)
	}
	for range 3 {
		few()
	}
	// Blocks keep coming, so that the node finalizes the big one.
	stop := make(chan struct{})
	sealed := make(chan struct{})
	go func() {
		defer close(sealed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.Seal()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-sealed })

	node := startProxy(t, info.RPCURL)
	node.Set(func(f *rpcfault.Faults) { f.CutReplies = 1 })
	pool, dbURL := pgtest.NewPool(t)
	p := startProc(t, "replica", pollerEnv(dbURL, node.URL, info, freeAddr(t),
		"MAX_BLOCK_RANGE=2000", "TX_TIMEOUT=4m", "RPC_TIMEOUT=2m"), "poller")
	target := int64(head) + 3
	waitFor(t, 6*time.Minute, "the cursor past the block of 10,000 burns", func() bool { return cursorBlock(t, pool) >= target })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("replica exited %d", code)
	}
	rows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, pool)))
	inBig, above := 0, 0
	for _, r := range rows {
		if r.BlockNumber == head {
			inBig++
		}
		if a, ok := new(big.Int).SetString(r.Amount, 10); ok && a.Cmp(huge) >= 0 {
			above++
		}
	}
	if inBig != 10_000 || above != 100 {
		t.Fatalf("%d payments in block %d and %d of at least 10^30, want 10,000 and 100", inBig, head, above)
	}
	// The block's receipts, over the cap as one reply, were read by
	// transaction, in batches that fit.
	if st := node.Stats(); st.CutReplies != 1 || st.Calls["eth_getTransactionReceipt"] < 100 {
		t.Fatalf("%d receipts replies cut and %d transaction receipts read, want 1 and at least the big block's 100",
			st.CutReplies, st.Calls["eth_getTransactionReceipt"])
	}
	var cut int
	for line := range strings.Lines(p.out.String()) {
		if strings.Contains(line, `"msg":"poll failed; rolled back, retrying"`) && strings.Contains(line, "EOF") {
			cut++
		}
	}
	if cut != 1 {
		t.Fatalf("%d failed polls logged for a reply cut short, want 1", cut)
	}
}
