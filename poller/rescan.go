package poller

import (
	"context"
	"fmt"

	"github.com/burnpoller/burnpoller/chain"
)

// Rescan re-reads blocks [from, cursor] and records any burn missing from
// the ledger: a node once answered with less than the chain holds. It never
// moves the cursor. Like every range the transaction records, the ledger's
// rows of those blocks must match the canonical chain, and the cursor block
// must still have the committed hash; otherwise it returns a
// *ViolationError and writes nothing.
func (t *RangeTx) Rescan(ctx context.Context, from int64) (Totals, error) {
	if t.used {
		return Totals{}, errUsed
	}
	t.used = true
	cur := t.cur
	t.totals.Rescanned, t.totals.RescanFrom, t.totals.RescanTo = true, from, cur.Block
	prev := ""
	for next := from; next <= cur.Block; {
		r, err := t.w.node.BurnRange(ctx, t.w.cfg.Contract, uint64(next), uint64(cur.Block))
		if err != nil {
			return Totals{}, fmt.Errorf("rescanning blocks [%d, %d]: %w", next, cur.Block, err)
		}
		if r.From.Number != uint64(next) || r.To.Number < r.From.Number || r.To.Number > uint64(cur.Block) {
			return Totals{}, fmt.Errorf("%w: rescan asked for blocks [%d, %d], got [%d, %d]", chain.ErrBadReply, next, cur.Block, r.From.Number, r.To.Number)
		}
		if prev != "" && hashHex(r.From.ParentHash) != prev {
			return Totals{}, fmt.Errorf("%w: block %d's parent is %s, but block %d was %s a moment ago",
				chain.ErrBadReply, next, hashHex(r.From.ParentHash), next-1, prev)
		}
		if int64(r.To.Number) == cur.Block && cur.Hash != "" && hashHex(r.To.Hash) != cur.Hash {
			return Totals{}, &ViolationError{Cursor: cur, Block: cur.Block, Committed: cur.Hash,
				ChainHash: hashHex(r.To.Hash), SeenAt: r.To.Number}
		}
		// Re-read blocks hold duplicates by nature: only what was missing
		// counts.
		got, err := t.record(ctx, r)
		if err != nil {
			return Totals{}, err
		}
		t.totals.Inserted += got.inserted
		t.totals.Recovered += got.inserted
		prev = hashHex(r.To.Hash)
		next = int64(r.To.Number) + 1
	}
	if err := t.tx.MarkRescanned(ctx, cur.ID); err != nil {
		return Totals{}, err
	}
	return t.totals, nil
}
