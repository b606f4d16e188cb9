package poller

import (
	"context"
	"errors"
	"log/slog"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// recorded is what recording one range did.
type recorded struct {
	logs, rejected       int
	inserted, duplicates int64
}

// record checks the ledger's rows of contracts in r's blocks against the
// canonical chain, then inserts r's payments and rejected logs and runs the
// payment hook for the new payments, inside the transaction. r holds the
// burns of contracts, and of no other.
func (t *RangeTx) record(ctx context.Context, r chain.Range, contracts []string) (recorded, error) {
	ps, err := toPayments(t.w.cfg.ChainID, r.Burns)
	if err != nil {
		return recorded{}, err
	}
	// One writer of a contract records at a time, so that the check below
	// sees what another writer (a backfill beside the live loop) committed
	// for the same blocks; it waits at most LOCK_WAIT.
	if err := t.lockWriters(ctx); err != nil {
		return recorded{}, err
	}
	known, err := t.checkLedger(ctx, r, ps, contracts)
	if err != nil {
		return recorded{}, err
	}
	// The burns seen at the head that these blocks settle leave
	// pending_payments here: those the chain holds where they were seen
	// become payments (their confirmed events below say so), the others are
	// retracted.
	if err := t.settlePending(ctx, r, ps, contracts); err != nil {
		return recorded{}, err
	}
	if len(r.Rejected) > 0 {
		rs, err := toRejected(t.w.cfg.ChainID, r.Rejected)
		if err != nil {
			return recorded{}, err
		}
		if _, err := t.tx.InsertRejected(ctx, rs); err != nil {
			return recorded{}, err
		}
		for _, rj := range r.Rejected {
			t.w.log.Error("burn-event log does not decode; recorded in rejected_logs, not credited",
				slog.String("tx", rj.Log.TxHash.Hex()), slog.Uint64("log_index", uint64(rj.Log.Index)),
				slog.Uint64("block", rj.Log.BlockNumber), slog.String("reason", rj.Reason))
		}
	}
	// The retractions first, then the confirmed events InsertPayments
	// records with the payments.
	if err := t.flushEvents(ctx); err != nil {
		return recorded{}, err
	}
	ins, err := t.insert(ctx, ps, known)
	if err != nil {
		return recorded{}, err
	}
	// The application's side effect commits with the payments or not at
	// all; duplicates trigger nothing.
	if err := t.tx.RunHook(ctx, t.w.cfg.Hook, ins); err != nil {
		return recorded{}, err
	}
	t.note.Add(ins)
	t.countEvents(payments.KindConfirmed, len(ins)) // recorded with the payments
	return recorded{logs: len(r.Burns), rejected: len(r.Rejected), inserted: int64(len(ins)), duplicates: int64(len(ps) - len(ins))}, nil
}

// insert records the payments of ps the ledger does not hold yet (known
// are those it holds, as checkLedger found them under the writers' lock):
// copied, without ON CONFLICT's check before each row. A payment recorded
// after all fails the transaction, which is retried with the check for
// every range of the next transactions until one commits (a defect in what
// the writer read, logged once), never recording a burn twice. (Were the
// check kept for the next insert alone, a transaction that failed at its
// k-th range would spend it on its first range when retried, and fail
// again at the k-th.)
func (t *RangeTx) insert(ctx context.Context, ps []payments.Payment, known map[payments.Key]bool) ([]payments.Inserted, error) {
	if t.careful {
		return t.tx.InsertPayments(ctx, ps)
	}
	fresh := ps
	if len(known) > 0 {
		fresh = make([]payments.Payment, 0, len(ps))
		for _, p := range ps {
			if !known[p.Key()] {
				fresh = append(fresh, p)
			}
		}
	}
	ins, err := t.tx.InsertNewPayments(ctx, fresh)
	if errors.Is(err, payments.ErrRecorded) {
		t.w.careful.Store(true)
		t.w.log.Error("a payment the ledger check found new is recorded already; the range is recorded again, checking each row", slog.Any("err", err))
	}
	return ins, err
}
