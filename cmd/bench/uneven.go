package main

import (
	"context"
	"math/big"
	"math/rand/v2"
	"time"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/devchain"
)

// The dense catch-up's shapes of chain (-shape).
const (
	// shapeEven is the same number of burns in every block (-per-tx ×
	// -txs-per-block), each with its own digest and an amount up to 10^12.
	shapeEven = "even"
	// shapeUneven is a chain as users' look (issue 30): blocks as a node
	// packs them when a varying number of 100-burn transactions wait, from
	// one transaction to 31 (100 to 3,100 burns, 6,200 logs with the
	// token's Transfers; a median of 300); the 100 burns of a transaction
	// share a digest; the first transaction's amounts are near 2^200; geth
	// keeps its database in memory.
	shapeUneven = "uneven"
)

// unevenPerTx is the burns of one uneven seeding transaction.
const unevenPerTx = 100

// unevenBlockTxs is how many transactions the uneven shape's next block
// holds, drawn from rng: a fifth each of 1, 2 and 3 (the median), 15% of
// 4, 17% of 5 to 10 and 8% of 20 to 31; block 7 holds 31.
func unevenBlockTxs(rng *rand.Rand, block int) int {
	if block == 7 {
		return 31
	}
	switch r := rng.IntN(100); {
	case r < 60:
		return 1 + r/20
	case r < 75:
		return 4
	case r < 92:
		return 5 + rng.IntN(6)
	default:
		return 20 + rng.IntN(12)
	}
}

// seedUneven seeds burns on c in the uneven shape (shapeUneven). The
// blocks' sizes come from a fixed seed: every run seeds the same chain.
func (s *seeder) seedUneven(ctx context.Context, c burnContracts, burns int) (*denseSeed, error) {
	start := time.Now()
	d := &denseSeed{Burns: burns, PerTx: unevenPerTx}
	rng := rand.New(rand.NewPCG(30, 30))
	huge := new(big.Int).Lsh(big.NewInt(1), 200)
	for left, tx := burns, 0; left > 0; {
		var txs []*types.Transaction
		inBlock := 0
		for k := unevenBlockTxs(rng, len(d.blockNumbers)); k > 0 && left > 0; k-- {
			n := min(unevenPerTx, left)
			amounts := make([]*big.Int, n)
			digests := make([][32]byte, n)
			digest := devchain.RandomDigest()
			for i := range n {
				if tx == 0 {
					amounts[i] = new(big.Int).Add(huge, big.NewInt(int64(i)*7919+1))
				} else {
					amounts[i] = devchain.RandomAmount()
				}
				digests[i] = digest
			}
			t, err := s.burnManyTx(c.batch, amounts, digests)
			if err != nil {
				return nil, err
			}
			txs = append(txs, t)
			tx++
			left -= n
			inBlock += n
		}
		if err := s.sealInto(ctx, d, txs, inBlock); err != nil {
			return nil, err
		}
	}
	return d, s.finish(ctx, d, start)
}
