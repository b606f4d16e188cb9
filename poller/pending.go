package poller

import (
	"context"
	"slices"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// pendingState is what a range transaction knows of the pending rows of
// the contracts it holds the writer lock of.
type pendingState int

const (
	pendingUnknown pendingState = iota // not looked, or put since
	pendingNone
	pendingSome
)

// settlePending removes the pending rows of r's blocks and of r's burns and
// retracts those whose position (block hash) r does not hold.
func (t *RangeTx) settlePending(ctx context.Context, r chain.Range, ps []payments.Payment, contracts []string) error {
	if none, err := t.nonePending(ctx, contracts); none || err != nil {
		return err
	}
	from, to := ends(r)
	taken, err := t.tx.TakePending(ctx, t.w.cfg.ChainID, contracts, from, to, ps)
	if err != nil {
		return err
	}
	if len(taken) == 0 {
		return nil
	}
	type position struct {
		key   payments.Key
		block string
	}
	onChain := make(map[position]bool, len(ps))
	for _, p := range ps {
		onChain[position{p.Key(), p.BlockHash}] = true
	}
	for _, p := range taken {
		if !onChain[position{p.Key(), p.BlockHash}] {
			t.retract(p.Payment, "")
		}
	}
	return nil
}

// nonePending says that pending_payments holds no row of contracts, as the
// transaction found when it first asked, holding the writer lock of all of
// them (the group's contracts; a rescan's may be others). It asks once per
// transaction, and again after the transaction put pending rows.
func (t *RangeTx) nonePending(ctx context.Context, contracts []string) (bool, error) {
	locked := t.w.contracts()
	if !t.writing || !isSubset(contracts, locked) {
		return false, nil
	}
	if t.pending == pendingUnknown {
		some, err := t.tx.AnyPending(ctx, t.w.cfg.ChainID, locked)
		if err != nil {
			return false, err
		}
		t.pending = pendingNone
		if some {
			t.pending = pendingSome
		}
	}
	return t.pending == pendingNone, nil
}

// isSubset says whether every element of a is in b.
func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// putPending records ps as pending, under the writer lock.
func (t *RangeTx) putPending(ctx context.Context, ps []payments.Payment) error {
	t.pending = pendingUnknown
	return t.tx.PutPending(ctx, ps)
}
