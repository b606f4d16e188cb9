package main

import (
	"context"
	"fmt"
	"math/big"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
)

// seed mines o.burns burns, o.perTx per transaction and o.txsPerBlock
// transactions per block, then enough empty blocks for them to finalize.
func seed(ctx context.Context, c *devchain.Chain, o options) (uint64, error) {
	left := o.burns
	for left > 0 {
		for p := 0; p < o.txsPerBlock && left > 0; p++ {
			n := min(o.perTx, left)
			amounts := make([]*big.Int, n)
			digests := make([][32]byte, n)
			for i := range n {
				amounts[i] = devchain.RandomAmount()
				digests[i] = devchain.RandomDigest()
			}
			if _, err := c.BurnMany(ctx, p, amounts, digests); err != nil {
				return 0, err
			}
			left -= n
		}
		c.Seal()
	}
	for range 64 {
		c.Seal()
	}
	return c.Client().BlockNumber(ctx)
}

// finalized is the node's finalized block number.
func finalized(ctx context.Context, rpcURL string) (uint64, error) {
	cl, err := chain.Dial(ctx, rpcURL, chain.Options{})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	h, err := cl.HeaderByTag(ctx, "finalized")
	if err != nil {
		return 0, fmt.Errorf("finalized block of %s: %w", rpcURL, err)
	}
	return h.Number, nil
}
