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

// TestAOneBlockRangeReadsItsHeaderOnce: a range of one block (a target that
// moved by one) asks that block's header once, in the batch with the logs.
func TestAOneBlockRangeReadsItsHeaderOnce(t *testing.T) {
	t.Parallel()
	l := burnLog(12, 1, 0, big.NewInt(5), 1)
	n := &receiptNode{logs: []types.Log{l}, receipts: receiptsOf(l)}
	c, _ := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 12, 12)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Hash != hashOf(12) || r.To.Hash != hashOf(12) || burnKeys(r.Burns) != "12/0/01=5" {
		t.Fatalf("range %+v", r)
	}
	want := []string{"eth_getLogs+eth_getBlockByNumber", "eth_getBlockReceipts"}
	if got := n.requestMethods(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}
