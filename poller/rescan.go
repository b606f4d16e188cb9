package poller

import (
	"context"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Rescan re-reads blocks [from, cursor] and records any burn missing from
// the ledger: a node once answered with less than the chain holds. It never
// moves the cursor. Each contract is read only from the block the group's
// cursor covers it from (its live_from): below that, a contract added to
// the group has its history read by its own backfill, and its absence there
// says nothing about a node. Like every read, the ledger's rows of those
// blocks must match the canonical chain and the cursor block must still
// have the committed hash; otherwise it returns a *ViolationError and
// writes nothing.
func (t *RangeTx) Rescan(ctx context.Context, from int64) (Totals, error) {
	if err := t.use(); err != nil {
		return Totals{}, err
	}
	cur := t.cur
	t.totals.Rescanned, t.totals.RescanFrom, t.totals.RescanTo = true, from, cur.Block
	after := ""
	for _, seg := range rescanSegments(t.w.cfg.Contracts, t.members, from, cur.Block) {
		if len(seg.contracts) == 0 {
			after = "" // nothing read here: nothing to continue
			continue
		}
		ranges := t.w.read(ctx, readSpec{contracts: seg.contracts, from: seg.from, to: seg.to, ledger: cur, after: after})
		err := func() error {
			defer ranges.Stop()
			for !ranges.Done() {
				r, err := ranges.Next(ctx)
				if err != nil {
					return err
				}
				// Re-read blocks hold duplicates by nature: only what
				// was missing counts.
				got, err := t.record(ctx, r, lowerHexes(seg.contracts))
				if err != nil {
					return err
				}
				t.totals.Inserted += got.inserted
				t.totals.Recovered += got.inserted
			}
			after = ranges.End()
			return nil
		}()
		if err != nil {
			return Totals{}, err
		}
	}
	if err := t.tx.MarkRescanned(ctx, cur.ID); err != nil {
		return Totals{}, err
	}
	return t.totals, nil
}

// segment is a span of blocks read with one set of contracts.
type segment struct {
	from, to  int64
	contracts []common.Address
}

// rescanSegments splits [from, to] where a contract's live_from falls, so
// that each segment reads exactly the contracts the group's cursor covered
// there. Without members (a writer of no group) every contract is read
// throughout.
func rescanSegments(contracts []common.Address, members []payments.Member, from, to int64) []segment {
	liveFrom := map[string]int64{}
	for _, m := range members {
		if !m.Removed {
			liveFrom[m.Contract] = m.LiveFrom
		}
	}
	starts := []int64{from}
	for _, c := range contracts {
		if lf, ok := liveFrom[lowerHex(c)]; ok && lf > from && lf <= to {
			starts = append(starts, lf)
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	var out []segment
	for i, s := range starts {
		end := to
		if i+1 < len(starts) {
			end = starts[i+1] - 1
		}
		seg := segment{from: s, to: end}
		for _, c := range contracts {
			if lf, ok := liveFrom[lowerHex(c)]; !ok || lf <= s {
				seg.contracts = append(seg.contracts, c)
			}
		}
		out = append(out, seg)
	}
	return out
}

// Recheck compares rc, the burns of blocks [from, cursor] as a node gives
// them now (a look's), with what the ledger holds there: the rescan a look
// carries. The cursor block must still have the committed hash (otherwise
// a *ViolationError, as any read). clean says the node's answer is exactly
// the ledger's rows of those blocks (the contracts the group covered
// there): every burn recorded, at the same block hash, with the same
// values, and none more, and no log that did not decode. Those rows were
// confirmed in receipts when recorded, and their blocks are final. The
// rescan is then done (marked, as Rescan marks it); otherwise nothing is
// written, and the caller rescans as Rescan does, which records what is
// missing and refuses what contradicts the ledger.
func (t *RangeTx) Recheck(ctx context.Context, from int64, rc chain.Recheck) (clean bool, err error) {
	cur := t.cur
	if cur.Hash != "" && hashHex(rc.Cursor.Hash) != cur.Hash {
		return false, &ViolationError{Cursor: cur, Block: cur.Block, Committed: cur.Hash, ChainHash: hashHex(rc.Cursor.Hash), SeenAt: cur.Block}
	}
	if len(rc.Rejected) > 0 {
		return false, nil
	}
	segs := rescanSegments(t.w.cfg.Contracts, t.members, from, cur.Block)
	covered := func(contract string, block int64) bool {
		for _, s := range segs {
			if block >= s.from && block <= s.to {
				return slices.Contains(lowerHexes(s.contracts), contract)
			}
		}
		return false
	}
	ps, err := toPayments(t.w.cfg.ChainID, rc.Burns)
	if err != nil {
		return false, err
	}
	want := make(map[payments.Key]payments.Payment, len(ps))
	txs := make([]string, 0, len(ps))
	for _, p := range ps {
		if covered(p.Contract, p.BlockNumber) {
			want[p.Key()] = p
			txs = append(txs, p.TxHash)
		}
	}
	rows, err := t.tx.LedgerRows(ctx, t.w.cfg.ChainID, t.w.contracts(), from, cur.Block, txs)
	if err != nil {
		return false, err
	}
	held := 0
	for _, r := range rows {
		if !covered(r.Contract, r.BlockNumber) {
			continue
		}
		p, ok := want[r.Key()]
		if !ok || !samePayment(r.Payment, p) {
			return false, nil
		}
		held++
	}
	if held != len(want) {
		return false, nil
	}
	t.totals.Rescanned, t.totals.RescanFrom, t.totals.RescanTo = true, from, cur.Block
	return true, t.tx.MarkRescanned(ctx, cur.ID)
}
