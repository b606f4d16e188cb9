package chain_test

import (
	"context"
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// TestReceiptsOfAFewTransactionsAreReadOneByOne: a block whose header the
// range holds lists its transactions; when they are few, their receipts,
// every one of them, cost less one by one than the block's receipts, and
// prove as much: a burn the reply left out in another of its transactions
// is still found, and a burn no receipt holds is still refused.
func TestReceiptsOfAFewTransactionsAreReadOneByOne(t *testing.T) {
	t.Parallel()
	replied := burnLog(12, 1, 0, big.NewInt(5), 1)
	hidden := burnLog(12, 3, 2, big.NewInt(7), 1)
	n := &receiptNode{logs: []types.Log{replied}, receipts: receiptsOf(replied, hidden),
		txs: map[uint64][]common.Hash{12: {replied.TxHash, hidden.TxHash}}}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 12)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), "12/0/01=5,12/2/03=7"; got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if f := obs.faultList(); f != "hidden_burn=1" {
		t.Fatalf("faults %q, want hidden_burn=1", f)
	}
	want := []string{
		"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber",
		"eth_getTransactionReceipt+eth_getTransactionReceipt",
	}
	if got := n.requestMethods(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}

	// A burn no receipt of the block holds: refused, as by the block's
	// receipts.
	forged := burnLog(12, 9, 4, big.NewInt(1_000_000), 1)
	n = &receiptNode{logs: []types.Log{replied, forged}, receipts: receiptsOf(replied),
		txs: map[uint64][]common.Hash{12: {replied.TxHash}}}
	c, obs = n.start(t, chain.Options{VerifyReceipts: true})
	_, err = c.BurnRange(context.Background(), []common.Address{contract}, 10, 12)
	wantBadReply(t, err)
	if f := obs.faultList(); f != "unconfirmed_burn=1" {
		t.Fatalf("faults %q, want unconfirmed_burn=1", f)
	}
	if n.calls("eth_getBlockReceipts") != 0 {
		t.Fatalf("requests %q, want the transactions' receipts only", n.requestMethods())
	}
}

// TestReceiptsOfABusyBlockAreReadAtOnce: when a block's transactions'
// receipts weigh more than the block's (40 × 15 against 500), or its
// transactions are not known (no header), eth_getBlockReceipts reads them;
// and then the range's other blocks too, in the same requests as before
// (a catch-up's ranges ask no more at once than they did).
func TestReceiptsOfABusyBlockAreReadAtOnce(t *testing.T) {
	t.Parallel()
	end := burnLog(12, 1, 0, big.NewInt(5), 1)
	middle := burnLog(11, 2, 0, big.NewInt(6), 1)
	busy := make([]common.Hash, 40)
	for i := range busy {
		busy[i] = common.BigToHash(big.NewInt(int64(1000 + i)))
	}
	busy[0] = end.TxHash
	for _, tt := range []struct {
		name string
		txs  []common.Hash
	}{{"a busy block", busy}, {"a block whose transactions are few, beside one not known", []common.Hash{end.TxHash}}} {
		n := &receiptNode{logs: []types.Log{middle, end}, receipts: receiptsOf(middle, end),
			txs: map[uint64][]common.Hash{12: tt.txs}}
		c, _ := n.start(t, chain.Options{VerifyReceipts: true})
		if _, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 12); err != nil {
			t.Fatal(err)
		}
		want := []string{"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber", "eth_getBlockReceipts+eth_getBlockReceipts"}
		if got := n.requestMethods(); !slices.Equal(got, want) {
			t.Fatalf("%s: requests %q, want %q", tt.name, got, want)
		}
	}
}

// TestAOneBlockRangeReadsItsHeaderOnce: a range of one block (a target that
// moved by one) asks that block's header once, in the batch with the logs.
func TestAOneBlockRangeReadsItsHeaderOnce(t *testing.T) {
	t.Parallel()
	l := burnLog(12, 1, 0, big.NewInt(5), 1)
	n := &receiptNode{logs: []types.Log{l}, receipts: receiptsOf(l), txs: map[uint64][]common.Hash{12: {l.TxHash}}}
	c, _ := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 12, 12)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Hash != hashOf(12) || r.To.Hash != hashOf(12) || burnKeys(r.Burns) != "12/0/01=5" {
		t.Fatalf("range %+v", r)
	}
	want := []string{"eth_getLogs+eth_getBlockByNumber", "eth_getTransactionReceipt"}
	if got := n.requestMethods(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}
