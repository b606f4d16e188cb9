package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventFor is the event of kind for burn p at its position; id is the
// payment's id for a confirmed event, 0 otherwise.
func EventFor(kind string, p Payment, id int64) Event {
	return Event{
		EventID: EventID(p.ChainID, p.TxHash, p.LogIndex, kind, p.BlockHash),
		Kind:    kind, ChainID: p.ChainID, Contract: p.Contract, TxHash: p.TxHash, LogIndex: p.LogIndex,
		BlockNumber: p.BlockNumber, BlockHash: p.BlockHash, Payer: p.Payer, Digest: p.Digest,
		Amount: p.Amount, BurnedAt: p.BurnedAt, PaymentID: id,
	}
}

// Payment is the burn an event is about.
func (e Event) Payment() Payment {
	return Payment{ChainID: e.ChainID, Contract: e.Contract, TxHash: e.TxHash, LogIndex: e.LogIndex,
		BlockNumber: e.BlockNumber, BlockHash: e.BlockHash, Payer: e.Payer, Digest: e.Digest,
		Amount: e.Amount, BurnedAt: e.BurnedAt}
}

// AppendEvents numbers and records evs, in order, as the transaction's last
// write before it commits, and queues the {"seq":N} notification. Events
// whose event_id is already recorded (the same step recorded again, after a
// failover re-recorded a range) are skipped; the others get the next seqs.
// Taking the counter row is what orders writers by commit: another writer
// numbering events waits here until this transaction has committed, so
// seqs are gap-free and increase in commit order. It returns the recorded
// events' kinds in order (their count per kind feeds the metrics).
func (t *Tx) AppendEvents(ctx context.Context, evs []Event) ([]string, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	n := len(evs)
	var (
		ids       = make([]string, n)
		kinds     = make([]string, n)
		chainIDs  = make([]int64, n)
		contracts = make([]string, n)
		txHashes  = make([]string, n)
		indexes   = make([]int64, n)
		numbers   = make([]int64, n)
		hashes    = make([]string, n)
		payers    = make([]string, n)
		digests   = make([]string, n)
		amounts   = make([]string, n)
		times     = make([]time.Time, n)
		paymentID = make([]int64, n)
	)
	for i, e := range evs {
		if e.Amount == nil || e.Amount.Sign() < 0 {
			return nil, fmt.Errorf("event %s: amount %v is not a uint256", e.EventID, e.Amount)
		}
		ids[i], kinds[i], chainIDs[i], contracts[i] = e.EventID, e.Kind, int64(e.ChainID), e.Contract
		txHashes[i], indexes[i], numbers[i], hashes[i] = e.TxHash, int64(e.LogIndex), e.BlockNumber, e.BlockHash
		payers[i], digests[i], amounts[i], times[i], paymentID[i] = e.Payer, e.Digest, e.Amount.String(), e.BurnedAt, e.PaymentID
	}
	// The counter is held by each writer only from its numbering to its
	// commit, but a writer of a large range holds it for a while: waiting
	// for it is bounded by the transaction's own limit, not LOCK_WAIT
	// (meant for the cursor). A holder that froze is bounded by the
	// server's idle-in-transaction timeout like every other lock.
	if _, err := t.tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, millis(t.limits.TxTimeout)); err != nil {
		return nil, fmt.Errorf("bounding the wait for the event counter: %w", interpret(err))
	}
	rows, err := t.tx.Query(ctx, `
		WITH input AS MATERIALIZED (
			SELECT DISTINCT ON (event_id) *
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::bigint[],
			            $8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[], $13::bigint[])
			     WITH ORDINALITY AS e(event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
			                          block_hash, payer, digest, amount, burned_at, payment_id, ord)
			ORDER BY event_id, ord
		), fresh AS MATERIALIZED (
			SELECT i.*, row_number() OVER (ORDER BY ord) AS n
			FROM input i
			WHERE NOT EXISTS (SELECT 1 FROM payment_events x WHERE x.event_id = i.event_id)
		), counter AS (
			UPDATE payment_event_seq SET last_seq = last_seq + (SELECT count(*) FROM fresh)
			RETURNING last_seq - (SELECT count(*) FROM fresh) AS base
		)
		INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
		                            block_hash, payer, digest, amount, burned_at, payment_id)
		SELECT c.base + f.n, f.event_id, f.kind, f.chain_id, f.contract, f.tx_hash, f.log_index, f.block_number,
		       f.block_hash, f.payer, f.digest, f.amount::numeric(78,0), f.burned_at, nullif(f.payment_id, 0)
		FROM fresh f CROSS JOIN counter c
		ORDER BY f.n
		RETURNING seq, kind`,
		ids, kinds, chainIDs, contracts, txHashes, indexes, numbers, hashes, payers, digests, amounts, times, paymentID)
	if err != nil {
		return nil, fmt.Errorf("recording %d events: %w", n, interpret(err))
	}
	type numbered struct {
		seq  int64
		kind string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (numbered, error) {
		var x numbered
		return x, r.Scan(&x.seq, &x.kind)
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d events: %w", n, interpret(err))
	}
	if len(got) == 0 {
		return nil, nil
	}
	last := got[0].seq
	out := make([]string, len(got))
	for i, g := range got {
		last = max(last, g.seq)
		out[i] = g.kind
	}
	payload, err := json.Marshal(struct {
		Seq int64 `json:"seq"`
	}{last})
	if err != nil {
		return nil, err
	}
	if _, err := t.tx.Exec(ctx, `SELECT pg_notify($1, $2)`, EventsChannel, string(payload)); err != nil {
		return nil, fmt.Errorf("notifying %s: %w", EventsChannel, interpret(err))
	}
	return out, nil
}

// Pending is a burn seen above the finality target.
type Pending struct {
	Payment
	FirstSeen time.Time
}

const pendingColumns = `chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount::text, burned_at, first_seen`

func scanPending(rows pgx.Rows) ([]Pending, error) {
	defer rows.Close()
	var out []Pending
	for rows.Next() {
		var (
			p       Pending
			chainID int64
			amount  string
		)
		if err := rows.Scan(&chainID, &p.Contract, &p.TxHash, &p.LogIndex, &p.BlockNumber, &p.BlockHash,
			&p.Payer, &p.Digest, &amount, &p.BurnedAt, &p.FirstSeen); err != nil {
			return nil, fmt.Errorf("reading pending payments: %w", interpret(err))
		}
		p.ChainID = uint64(chainID)
		a, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return nil, fmt.Errorf("reading pending payments: amount %q of %s/%d is not an integer", amount, p.TxHash, p.LogIndex)
		}
		p.Amount = a
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading pending payments: %w", interpret(err))
	}
	return out, nil
}

// TakePending removes and returns the pending rows of contracts on chain
// chainID that a writer recording blocks [from, to] settles: those in the
// blocks, and those of the burns ps (wherever they were seen).
func (t *Tx) TakePending(ctx context.Context, chainID uint64, contracts []string, from, to int64, ps []Payment) ([]Pending, error) {
	txs := make([]string, len(ps))
	idx := make([]int64, len(ps))
	for i, p := range ps {
		txs[i], idx[i] = p.TxHash, int64(p.LogIndex)
	}
	rows, err := t.tx.Query(ctx, `
		DELETE FROM pending_payments
		WHERE chain_id = $1 AND (
		      (contract = ANY($2) AND block_number BETWEEN $3 AND $4)
		   OR (tx_hash, log_index) IN (SELECT * FROM unnest($5::text[], $6::int[])))
		RETURNING `+pendingColumns,
		int64(chainID), contracts, from, to, txs, idx)
	if err != nil {
		return nil, fmt.Errorf("settling pending payments of blocks [%d, %d]: %w", from, to, interpret(err))
	}
	return scanPending(rows)
}

// PendingOf reads the pending rows of contracts on chain chainID, in chain
// order.
func (t *Tx) PendingOf(ctx context.Context, chainID uint64, contracts []string) ([]Pending, error) {
	rows, err := t.tx.Query(ctx, `SELECT `+pendingColumns+` FROM pending_payments
		WHERE chain_id = $1 AND contract = ANY($2) ORDER BY block_number, log_index`, int64(chainID), contracts)
	if err != nil {
		return nil, fmt.Errorf("reading pending payments: %w", interpret(err))
	}
	return scanPending(rows)
}

// DropPending removes the pending rows of ps (by chain, transaction and
// log index).
func (t *Tx) DropPending(ctx context.Context, ps []Payment) error {
	if len(ps) == 0 {
		return nil
	}
	chainIDs := make([]int64, len(ps))
	txs := make([]string, len(ps))
	idx := make([]int64, len(ps))
	for i, p := range ps {
		chainIDs[i], txs[i], idx[i] = int64(p.ChainID), p.TxHash, int64(p.LogIndex)
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM pending_payments
		WHERE (tx_hash, log_index, chain_id) IN (SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[]))`,
		txs, idx, chainIDs); err != nil {
		return fmt.Errorf("removing %d pending payments: %w", len(ps), interpret(err))
	}
	return nil
}

// PutPending records ps as pending, replacing the row of a burn seen before
// at another position; first_seen is when it was seen where it is now.
func (t *Tx) PutPending(ctx context.Context, ps []Payment) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	var (
		chainIDs  = make([]int64, n)
		contracts = make([]string, n)
		txHashes  = make([]string, n)
		indexes   = make([]int64, n)
		numbers   = make([]int64, n)
		hashes    = make([]string, n)
		payers    = make([]string, n)
		digests   = make([]string, n)
		amounts   = make([]string, n)
		times     = make([]time.Time, n)
	)
	for i, p := range ps {
		if p.Amount == nil || p.Amount.Sign() < 0 {
			return fmt.Errorf("pending payment %s/%d: amount %v is not a uint256", p.TxHash, p.LogIndex, p.Amount)
		}
		chainIDs[i], contracts[i], txHashes[i], indexes[i] = int64(p.ChainID), p.Contract, p.TxHash, int64(p.LogIndex)
		numbers[i], hashes[i], payers[i], digests[i] = p.BlockNumber, p.BlockHash, p.Payer, p.Digest
		amounts[i], times[i] = p.Amount.String(), p.BurnedAt
	}
	if _, err := t.tx.Exec(ctx, `
		INSERT INTO pending_payments (chain_id, contract, tx_hash, log_index, block_number, block_hash,
		                              payer, digest, amount, burned_at)
		SELECT chain_id, contract, tx_hash, log_index, block_number, block_hash,
		       payer, digest, amount::numeric(78,0), burned_at
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[],
		            $7::text[], $8::text[], $9::text[], $10::timestamptz[])
		     AS p(chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		ON CONFLICT (tx_hash, log_index, chain_id) DO UPDATE SET
		    contract = excluded.contract, block_number = excluded.block_number, block_hash = excluded.block_hash,
		    payer = excluded.payer, digest = excluded.digest, amount = excluded.amount,
		    burned_at = excluded.burned_at, first_seen = now()`,
		chainIDs, contracts, txHashes, indexes, numbers, hashes, payers, digests, amounts, times); err != nil {
		return fmt.Errorf("recording %d pending payments: %w", n, interpret(err))
	}
	return nil
}

// RecordedBlockHashes returns, for those of ps already in the ledger (not
// orphaned), the block hash they were recorded with, keyed by
// "tx_hash/log_index".
func (t *Tx) RecordedBlockHashes(ctx context.Context, chainID uint64, ps []Payment) (map[string]string, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	txs := make([]string, len(ps))
	idx := make([]int64, len(ps))
	for i, p := range ps {
		txs[i], idx[i] = p.TxHash, int64(p.LogIndex)
	}
	rows, err := t.tx.Query(ctx, `SELECT p.tx_hash, p.log_index, p.block_hash
		FROM unnest($1::text[], $2::int[]) AS k(tx_hash, log_index)
		JOIN payments p ON p.tx_hash = k.tx_hash AND p.log_index = k.log_index
		WHERE p.chain_id = $3 AND p.orphaned_at IS NULL`, txs, idx, int64(chainID))
	if err != nil {
		return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var (
			tx, hash string
			index    uint32
		)
		if err := rows.Scan(&tx, &index, &hash); err != nil {
			return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
		}
		out[KeyOf(tx, index)] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
	}
	return out, nil
}

// KeyOf is a burn's key within a chain, "tx_hash/log_index".
func KeyOf(txHash string, logIndex uint32) string {
	return fmt.Sprintf("%s/%d", txHash, logIndex)
}

// SetHead records the head head tracking read for chain chainID.
func (t *Tx) SetHead(ctx context.Context, chainID uint64, block int64, hash string) error {
	if _, err := t.tx.Exec(ctx, `
		INSERT INTO chain_heads (chain_id, block_number, block_hash) VALUES ($1, $2, $3)
		ON CONFLICT (chain_id) DO UPDATE SET block_number = excluded.block_number,
		    block_hash = excluded.block_hash, updated_at = now()`, int64(chainID), block, hash); err != nil {
		return fmt.Errorf("recording the head: %w", interpret(err))
	}
	return nil
}
