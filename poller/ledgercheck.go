package poller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// checkLedger compares what the ledger already holds for r's blocks, and
// for r's transactions wherever they were recorded, with the canonical
// burns ps. A row whose block the chain no longer holds (another block
// hash), whatever else differs, is a finality violation: inserting r would
// record a burn twice under two keys, or leave a row of a dropped branch
// standing as if canonical. A row whose block is still canonical but that r
// contradicts (a key r lacks, other values, the transaction elsewhere) means
// the node's answer is wrong, not the chain: a bad reply, retried elsewhere.
// It returns the keys of ps the ledger holds already, as ps has them.
func (t *RangeTx) checkLedger(ctx context.Context, r chain.Range, ps []payments.Payment, contracts []string) (known map[payments.Key]bool, err error) {
	txs := make([]string, 0, len(ps))
	canonical := make(map[payments.Key]*payments.Payment, len(ps))
	byTx := make(map[string]*payments.Payment, len(ps))
	for i := range ps {
		p := &ps[i]
		canonical[p.Key()] = p
		if _, seen := byTx[p.TxHash]; !seen {
			byTx[p.TxHash] = p
			txs = append(txs, p.TxHash)
		}
	}
	from, to := ends(r)
	rows, err := t.tx.LedgerRows(ctx, t.w.cfg.ChainID, contracts, from, to, txs)
	if err != nil {
		return nil, err
	}
	known = make(map[payments.Key]bool, len(rows))
	for i := range rows {
		row := &rows[i]
		c, ok := canonical[row.Key()]
		if ok && samePayment(row.Payment, *c) {
			known[row.Key()] = true
			continue
		}
		if !ok {
			c = byTx[row.TxHash] // the same transaction elsewhere, if at all
		}
		chainHash, err := t.canonicalHash(ctx, r, row.BlockNumber)
		if err != nil {
			return nil, fmt.Errorf("checking payment %d against the chain: %w", row.ID, err)
		}
		if chainHash == row.BlockHash {
			return nil, fmt.Errorf("%w: payment %d (tx %s log %d) is in block %d, which is still canonical (%s), but the node's reply for blocks [%d, %d] does not hold it as recorded",
				chain.ErrBadReply, row.ID, row.TxHash, row.LogIndex, row.BlockNumber, chainHash, r.From.Number, r.To.Number)
		}
		return nil, &ViolationError{Cursor: t.cur, Block: row.BlockNumber, Committed: row.BlockHash, ChainHash: chainHash,
			SeenAt: ledgerBlock(r.To.Number), Payment: row, OnChain: c}
	}
	return known, nil
}

func samePayment(a, b payments.Payment) bool {
	return a.ChainID == b.ChainID && a.Contract == b.Contract && a.BlockNumber == b.BlockNumber &&
		a.BlockHash == b.BlockHash && a.Payer == b.Payer && a.Digest == b.Digest && a.Amount.Cmp(b.Amount) == 0 &&
		a.BurnedAt.Equal(b.BurnedAt)
}

// errNeedHashes says a check needs canonical hashes the writer must read
// from the node first: the transaction, which holds the writers' lock,
// never waits on the node for them. It rolls back; the writer reads them
// (FetchHashes) and the next transaction finds them.
type errNeedHashes struct{ blocks []int64 }

func (e *errNeedHashes) Error() string {
	return fmt.Sprintf("the ledger check needs the canonical hashes of blocks %v, read before the next attempt", e.blocks)
}

// NeedsHashes reports whether err asks for canonical hashes to be read
// before the transaction is tried again (see FetchHashes).
func NeedsHashes(err error) bool {
	var need *errNeedHashes
	return errors.As(err, &need)
}

// FetchHashes reads, outside any transaction, the canonical hashes err
// asked for (NeedsHashes), for the next transaction's check to use once.
func (w *Writer) FetchHashes(ctx context.Context, err error) error {
	var need *errNeedHashes
	if !errors.As(err, &need) {
		return nil
	}
	hashes := map[int64]string{}
	if err := w.canonicalHashes(ctx, need.blocks, hashes); err != nil {
		return err
	}
	w.hashesMu.Lock()
	defer w.hashesMu.Unlock()
	if w.hashes == nil {
		w.hashes = map[int64]string{}
	}
	maps.Copy(w.hashes, hashes)
	return nil
}

// knownHash is a canonical hash FetchHashes read, used once.
func (w *Writer) knownHash(n int64) (string, bool) {
	w.hashesMu.Lock()
	defer w.hashesMu.Unlock()
	h, ok := w.hashes[n]
	delete(w.hashes, n)
	return h, ok
}

// canonicalHash is block n's hash on the chain now: from r when it holds
// it, else one FetchHashes read before this transaction; otherwise an
// errNeedHashes, and nothing is written.
func (t *RangeTx) canonicalHash(_ context.Context, r chain.Range, n int64) (string, error) {
	switch from, to := ends(r); n {
	case from:
		return hashHex(r.From.Hash), nil
	case to:
		return hashHex(r.To.Hash), nil
	}
	for _, b := range r.Burns {
		if ledgerBlock(b.BlockNumber) == n {
			return hashHex(b.BlockHash), nil
		}
	}
	if h, ok := t.w.knownHash(n); ok {
		return h, nil
	}
	// A block the node does not have is an error, retried: a payment is
	// never judged on a missing answer.
	return "", &errNeedHashes{blocks: []int64{n}}
}
