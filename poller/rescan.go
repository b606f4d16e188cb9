package poller

import (
	"context"
	"fmt"
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
		r, err := t.w.node.BurnRange(ctx, t.w.cfg.Contracts, uint64(next), uint64(cur.Block))
		if err != nil {
			return Totals{}, fmt.Errorf("rescanning blocks [%d, %d]: %w", next, cur.Block, err)
		}
		if err := checkSpan(r, next, cur.Block); err != nil {
			return Totals{}, fmt.Errorf("rescanning: %w", err)
		}
		if err := checkContinues(r, prev); err != nil {
			return Totals{}, err
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
