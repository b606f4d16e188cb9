package payments

import (
	"context"
	"errors"
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

// AppendEvents stages evs, in order, to be numbered and recorded when the
// transaction commits (see the note below). Each is a step the transaction's changes
// to the ledger take: an event id already recorded names an earlier
// occurrence of the same step, and this one is recorded as the next
// occurrence (see EventID). It returns the events' kinds, in order (their
// count per kind feeds the metrics).
func (t *Tx) AppendEvents(ctx context.Context, evs []Event) ([]string, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	n := len(evs)
	var (
		cols      = newColumns(n)
		ords      = make([]int64, n)
		eventIDs  = make([]string, n)
		kinds     = make([]string, n)
		paymentID = make([]int64, n)
		reasons   = make([]string, n)
	)
	for i, e := range evs {
		if err := cols.add("event "+e.EventID+" of", e.Payment()); err != nil {
			return nil, err
		}
		ords[i], eventIDs[i], kinds[i] = t.staged+int64(i)+1, e.EventID, e.Kind
		paymentID[i], reasons[i] = e.PaymentID, e.Reason
	}
	if _, err := t.tx.Exec(ctx, `
		WITH mark AS (
			INSERT INTO ledger_commits (events) SELECT true WHERE NOT $16::bool
		)
		INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
		                                   block_hash, payer, digest, amount, burned_at, payment_id, reason)
		SELECT ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
		       block_hash, payer, digest, amount::numeric(78,0), burned_at, nullif(payment_id, 0), nullif(reason, '')
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::int[],
		            $8::bigint[], $9::text[], $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::bigint[],
		            $15::text[])
		     AS e(ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
		          block_hash, payer, digest, amount, burned_at, payment_id, reason)`,
		append(append([]any{ords, eventIDs, kinds}, cols.args()...), paymentID, reasons, t.marked)...); err != nil {
		return nil, fmt.Errorf("recording %d events: %w", n, interpret(err))
	}
	t.staged += int64(n)
	t.marked = true
	return kinds, nil
}

// Events are numbered when the transaction commits, not when they are
// written (migration 10): a writer stages them in payment_events_staged and
// leaves a row in ledger_commits, whose deferred trigger runs inside COMMIT,
// takes the event counter (payment_event_seq), numbers the staged events
// after it, moves them into payment_events and notifies burnpoller_events
// with {"seq":N}, N the last. The counter is held only while the server
// commits, after the client has sent COMMIT: a writer that freezes or loses
// its network mid-transaction holds nothing another group waits for, and
// the next committer takes the counter only once this commit is visible, so
// seqs stay gap-free and increasing in commit order.

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
	k := keyColumns(ps)
	rows, err := t.tx.Query(ctx, `
		DELETE FROM pending_payments
		WHERE chain_id = $1 AND (
		      (contract = ANY($2) AND block_number BETWEEN $3 AND $4)
		   OR (tx_hash, log_index, contract) IN (SELECT * FROM unnest($5::text[], $6::int[], $7::text[])))
		RETURNING `+pendingColumns,
		int64(chainID), contracts, from, to, k.txs, k.indexes, k.contracts)
	if err != nil {
		return nil, fmt.Errorf("settling pending payments of blocks [%d, %d]: %w", from, to, interpret(err))
	}
	return scanPending(rows)
}

// AnyPending says whether pending_payments holds a row of contracts on
// chain chainID. A writer holding the contracts' writer lock (LockWriters)
// that finds none knows TakePending has nothing to take until it commits:
// pending rows are put under the same lock.
func (t *Tx) AnyPending(ctx context.Context, chainID uint64, contracts []string) (bool, error) {
	var found bool
	if err := t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pending_payments WHERE chain_id = $1 AND contract = ANY($2))`,
		int64(chainID), contracts).Scan(&found); err != nil {
		return false, fmt.Errorf("looking for pending payments: %w", interpret(err))
	}
	return found, nil
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

// DropPending removes the pending rows of ps (by chain, contract,
// transaction and log index).
func (t *Tx) DropPending(ctx context.Context, ps []Payment) error {
	if len(ps) == 0 {
		return nil
	}
	chainIDs := make([]int64, len(ps))
	for i, p := range ps {
		chainIDs[i] = int64(p.ChainID)
	}
	k := keyColumns(ps)
	if _, err := t.tx.Exec(ctx, `DELETE FROM pending_payments
		WHERE (tx_hash, log_index, chain_id, contract) IN (SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[]))`,
		k.txs, k.indexes, chainIDs, k.contracts); err != nil {
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
	cols := newColumns(len(ps))
	for _, p := range ps {
		if err := cols.add("pending payment", p); err != nil {
			return err
		}
	}
	if _, err := t.tx.Exec(ctx, `
		INSERT INTO pending_payments (chain_id, contract, tx_hash, log_index, block_number, block_hash,
		                              payer, digest, amount, burned_at)
		SELECT chain_id, contract, tx_hash, log_index, block_number, block_hash,
		       payer, digest, amount::numeric(78,0), burned_at
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[],
		            $7::text[], $8::text[], $9::text[], $10::timestamptz[])
		     AS p(chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		ON CONFLICT (tx_hash, log_index, chain_id, contract) DO UPDATE SET
		    block_number = excluded.block_number, block_hash = excluded.block_hash,
		    payer = excluded.payer, digest = excluded.digest, amount = excluded.amount,
		    burned_at = excluded.burned_at, first_seen = now()`,
		cols.args()...); err != nil {
		return fmt.Errorf("recording %d pending payments: %w", len(ps), interpret(err))
	}
	return nil
}

// RecordedBlockHashes returns, for those of ps already in the ledger (not
// orphaned), the block hash they were recorded with, by key.
func (t *Tx) RecordedBlockHashes(ctx context.Context, chainID uint64, ps []Payment) (map[Key]string, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	k := keyColumns(ps)
	rows, err := t.tx.Query(ctx, `SELECT p.contract, p.tx_hash, p.log_index, p.block_hash
		FROM unnest($1::text[], $2::int[], $3::text[]) AS k(tx_hash, log_index, contract)
		JOIN payments p ON p.tx_hash = k.tx_hash AND p.log_index = k.log_index AND p.contract = k.contract
		WHERE p.chain_id = $4 AND p.orphaned_at IS NULL`, k.txs, k.indexes, k.contracts, int64(chainID))
	if err != nil {
		return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
	}
	defer rows.Close()
	out := map[Key]string{}
	for rows.Next() {
		var (
			key  Key
			hash string
		)
		if err := rows.Scan(&key.Contract, &key.TxHash, &key.LogIndex, &hash); err != nil {
			return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
		}
		out[key] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading recorded payments: %w", interpret(err))
	}
	return out, nil
}

// Key is a burn's key within a chain: its contract, transaction and log
// index. The contract is part of it because a log index is a place in a
// block: a transaction re-included elsewhere can carry one contract's burn
// at an index where it carried another's.
type Key struct {
	Contract string
	TxHash   string
	LogIndex uint32
}

// Key is the payment's key within its chain.
func (p Payment) Key() Key { return Key{Contract: p.Contract, TxHash: p.TxHash, LogIndex: p.LogIndex} }

func (k Key) String() string { return fmt.Sprintf("%s/%s/%d", k.Contract, k.TxHash, k.LogIndex) }

// keys are payments' keys as the columns of an unnest.
type keys struct {
	txs       []string
	indexes   []int64
	contracts []string
}

func keyColumns(ps []Payment) keys {
	k := keys{txs: make([]string, len(ps)), indexes: make([]int64, len(ps)), contracts: make([]string, len(ps))}
	for i, p := range ps {
		k.txs[i], k.indexes[i], k.contracts[i] = p.TxHash, int64(p.LogIndex), p.Contract
	}
	return k
}

// SetHead records, when the transaction commits, the head head tracking
// read for chain chainID. The chain's row, shared by every group on the
// chain, is written inside COMMIT (see AppendEvents), never held across a
// round trip.
func (t *Tx) SetHead(ctx context.Context, chainID uint64, block int64, hash string) error {
	if _, err := t.tx.Exec(ctx, `INSERT INTO ledger_commits (head_chain_id, head_block, head_hash, events) VALUES ($1, $2, $3, false)`,
		int64(chainID), block, hash); err != nil {
		return fmt.Errorf("recording the head: %w", interpret(err))
	}
	return nil
}

// HeadScan is where a group's head tracking stands: the last block above
// its cursor it read, with that block's hash; Block is -1 when it has none.
type HeadScan struct {
	Block int64
	Hash  string
}

// HeadScan reads where group id's head tracking stands. The caller holds
// the group's cursor row, which keeps other passes of the group off it.
func (t *Tx) HeadScan(ctx context.Context, id string) (HeadScan, error) {
	s := HeadScan{Block: -1}
	err := t.tx.QueryRow(ctx, `SELECT block_number, block_hash FROM head_scans WHERE cursor_id = $1`, id).Scan(&s.Block, &s.Hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return HeadScan{Block: -1}, nil
	}
	if err != nil {
		return HeadScan{}, fmt.Errorf("reading where head tracking of %q stands: %w", id, interpret(err))
	}
	return s, nil
}

// SetHeadScan records, with the transaction, that group id's head tracking
// has read up to block (hash).
func (t *Tx) SetHeadScan(ctx context.Context, id string, block int64, hash string) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO head_scans (cursor_id, block_number, block_hash) VALUES ($1, $2, $3)
		ON CONFLICT (cursor_id) DO UPDATE SET block_number = excluded.block_number, block_hash = excluded.block_hash,
		    updated_at = now()`, id, block, hash)
	if err != nil {
		return fmt.Errorf("recording where head tracking of %q stands: %w", id, interpret(err))
	}
	return nil
}
