package devchain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
)

// Reorg replaces the last depth blocks with a new branch, never reaching
// down to the finalized block: it forks at the block depth below the head
// (or at the finalized block, if that is higher), and the new branch is
// canonical from then on. The transactions of the dropped blocks go back to
// the pool and are sealed again into the new branch's blocks, at other
// positions: their burns are seen, retracted and seen again. It returns the
// fork's parent block and how many transactions went back to the pool;
// parent is the head, and nothing changes, when there is nothing above the
// finalized block.
func (c *Chain) Reorg(ctx context.Context, depth uint64) (parent uint64, orphaned int, err error) {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	head, err := c.client.BlockNumber(ctx)
	if err != nil {
		return 0, 0, err
	}
	final, err := c.client.HeaderByNumber(ctx, big.NewInt(int64(rpc.FinalizedBlockNumber)))
	var finalN uint64
	if err == nil && final != nil {
		finalN = final.Number.Uint64()
	}
	parent = max(head-min(depth, head), finalN)
	if parent >= head {
		return head, 0, nil
	}
	var txs []common.Hash
	for n := parent + 1; n <= head; n++ {
		b, err := c.client.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			return 0, 0, fmt.Errorf("reading block %d: %w", n, err)
		}
		for _, tx := range b.Transactions() {
			txs = append(txs, tx.Hash())
		}
	}
	p, err := c.client.HeaderByNumber(ctx, new(big.Int).SetUint64(parent))
	if err != nil {
		return 0, 0, fmt.Errorf("reading block %d: %w", parent, err)
	}
	if err := c.backend.Fork(p.Hash()); err != nil {
		return 0, 0, fmt.Errorf("forking at block %d: %w", parent, err)
	}
	// The pool takes the dropped transactions back in the background;
	// sealing waits for it, so that their senders' next nonces stay valid.
	deadline := time.Now().Add(5 * time.Second)
	for _, h := range txs {
		for {
			_, pending, err := c.client.TransactionByHash(ctx, h)
			if err == nil && pending {
				break
			}
			if time.Now().After(deadline) {
				// Some never came back: the senders start over
				// from the chain's nonces.
				c.ResetNonces()
				return parent, len(txs), errors.New("dropped transactions did not all return to the pool; nonces reset")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return parent, len(txs), nil
}

// reorgEvery runs Reorg every d until Close.
func (c *Chain) reorgEvery(d time.Duration, depth uint64) {
	defer c.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		parent, n, err := c.Reorg(ctx, depth)
		cancel()
		if err != nil {
			c.log.Warn("reorganising", slog.Any("err", err))
		}
		c.log.Info("reorganised the chain", slog.Uint64("fork_parent", parent), slog.Int("transactions_back_to_the_pool", n))
	}
}
