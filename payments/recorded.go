package payments

import (
	"context"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5"
)

// Recorded is a payment as the ledger holds it.
type Recorded struct {
	ID int64
	Payment
	// Orphaned is true once an operator's cursor reset found the payment's
	// block no longer on the canonical chain.
	Orphaned bool
}

const recordedColumns = `id, chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount::text, burned_at, orphaned_at IS NOT NULL`

// PaymentsInBlocks reads the payments of contract on chain chainID in blocks
// [from, to], in chain order, orphaned ones included.
func (s *Store) PaymentsInBlocks(ctx context.Context, chainID uint64, contracts []string, from, to int64) ([]Recorded, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordedColumns+` FROM payments
		WHERE chain_id = $1 AND contract = ANY($2) AND block_number BETWEEN $3 AND $4
		ORDER BY block_number, log_index`, int64(chainID), contracts, from, to)
	if err != nil {
		return nil, fmt.Errorf("reading payments of blocks [%d, %d]: %w", from, to, interpret(err))
	}
	return scanRecorded(rows)
}

// PaymentsByKey reads the payments of chain chainID with the given keys,
// wherever they are, orphaned ones left out.
func (s *Store) PaymentsByKey(ctx context.Context, chainID uint64, ks []Key) ([]Recorded, error) {
	if len(ks) == 0 {
		return nil, nil
	}
	ps := make([]Payment, len(ks))
	for i, k := range ks {
		ps[i] = Payment{Contract: k.Contract, TxHash: k.TxHash, LogIndex: k.LogIndex}
	}
	k := keyColumns(ps)
	// By key alone first (the key's index), then by chain; see LedgerRows.
	rows, err := s.pool.Query(ctx, `
		WITH of_keys AS MATERIALIZED (
			SELECT * FROM payments WHERE orphaned_at IS NULL
			  AND (tx_hash, log_index, contract) IN (SELECT * FROM unnest($2::text[], $3::int[], $4::text[])))
		SELECT `+recordedColumns+` FROM of_keys WHERE chain_id = $1`,
		int64(chainID), k.txs, k.indexes, k.contracts)
	if err != nil {
		return nil, fmt.Errorf("reading payments by key: %w", interpret(err))
	}
	return scanRecorded(rows)
}

// PaymentBlocksAbove returns the distinct blocks above block that hold
// payments of contracts on chain chainID not marked orphaned, in order.
func (s *Store) PaymentBlocksAbove(ctx context.Context, chainID uint64, contracts []string, block int64) ([]int64, error) {
	return paymentBlocksAbove(ctx, s.pool, chainID, contracts, block)
}

// PaymentBlocksAbove is Store.PaymentBlocksAbove inside the transaction.
func (t *Tx) PaymentBlocksAbove(ctx context.Context, chainID uint64, contracts []string, block int64) ([]int64, error) {
	return paymentBlocksAbove(ctx, t.tx, chainID, contracts, block)
}

// querier is a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func paymentBlocksAbove(ctx context.Context, q querier, chainID uint64, contracts []string, block int64) ([]int64, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT block_number FROM payments
		WHERE chain_id = $1 AND contract = ANY($2) AND block_number > $3 AND orphaned_at IS NULL
		ORDER BY block_number`, int64(chainID), contracts, block)
	if err != nil {
		return nil, fmt.Errorf("reading the blocks holding payments above %d: %w", block, interpret(err))
	}
	blocks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reading the blocks holding payments above %d: %w", block, interpret(err))
	}
	return blocks, nil
}

// PaymentsByID reads the payments with ids in [first, last], in id order.
func (s *Store) PaymentsByID(ctx context.Context, first, last int64) ([]Recorded, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+recordedColumns+` FROM payments WHERE id BETWEEN $1 AND $2 ORDER BY id`, first, last)
	if err != nil {
		return nil, fmt.Errorf("reading payments %d..%d: %w", first, last, interpret(err))
	}
	return scanRecorded(rows)
}

// CountPayments counts the payments of contract on chain chainID in blocks
// [from, to].
func (t *Tx) CountPayments(ctx context.Context, chainID uint64, contracts []string, from, to int64) (int, error) {
	var n int
	err := t.tx.QueryRow(ctx, `SELECT count(*) FROM payments
		WHERE chain_id = $1 AND contract = ANY($2) AND block_number BETWEEN $3 AND $4`, int64(chainID), contracts, from, to).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting payments: %w", interpret(err))
	}
	return n, nil
}

// LedgerRows reads, for a writer about to record blocks [from, to] of chain
// chainID, the payments of contracts it must check against the canonical
// chain: those in these blocks, and those of the transactions txHashes
// wherever they are. Orphaned payments are left out.
func (t *Tx) LedgerRows(ctx context.Context, chainID uint64, contracts []string, from, to int64, txHashes []string) ([]Recorded, error) {
	// Two branches, each on its own index, rather than one OR; and the
	// transactions' rows found by transaction alone (a materialised step),
	// then filtered by chain: while a growing ledger's statistics are young,
	// the planner otherwise answers either by reading every row of the chain.
	rows, err := t.tx.Query(ctx, `
		WITH of_txs AS MATERIALIZED (
			SELECT * FROM payments WHERE tx_hash = ANY($5) AND orphaned_at IS NULL)
		SELECT `+recordedColumns+` FROM payments
		WHERE chain_id = $1 AND block_number BETWEEN $3 AND $4 AND contract = ANY($2) AND orphaned_at IS NULL
		UNION
		SELECT `+recordedColumns+` FROM of_txs WHERE chain_id = $1 AND contract = ANY($2)
		ORDER BY 6, 5`, int64(chainID), contracts, from, to, txHashes)
	if err != nil {
		return nil, fmt.Errorf("reading the ledger's payments of blocks [%d, %d]: %w", from, to, interpret(err))
	}
	return scanRecorded(rows)
}

// MarkOrphanedOffChain marks as orphaned the payments of contracts on chain
// chainID above block whose block hash is not the canonical one: blocks and
// hashes pair each block number with its canonical hash ("" for none), and
// must cover every block above block holding a payment. The rows stay. It
// returns the payments it marked.
func (t *Tx) MarkOrphanedOffChain(ctx context.Context, chainID uint64, contracts []string, block int64, blocks []int64, hashes []string) ([]Recorded, error) {
	rows, err := t.tx.Query(ctx, `
		UPDATE payments SET orphaned_at = now()
		FROM unnest($4::bigint[], $5::text[]) AS canonical(block, hash)
		WHERE chain_id = $1 AND contract = ANY($2) AND block_number > $3 AND orphaned_at IS NULL
		  AND block_number = canonical.block AND block_hash IS DISTINCT FROM nullif(canonical.hash, '')
		RETURNING `+recordedColumns, int64(chainID), contracts, block, blocks, hashes)
	if err != nil {
		return nil, fmt.Errorf("marking payments above block %d orphaned: %w", block, interpret(err))
	}
	return scanRecorded(rows)
}

func scanRecorded(rows pgx.Rows) ([]Recorded, error) {
	defer rows.Close()
	var out []Recorded
	for rows.Next() {
		var (
			r       Recorded
			chainID int64
			amount  string
		)
		if err := rows.Scan(&r.ID, &chainID, &r.Contract, &r.TxHash, &r.LogIndex, &r.BlockNumber, &r.BlockHash,
			&r.Payer, &r.Digest, &amount, &r.BurnedAt, &r.Orphaned); err != nil {
			return nil, fmt.Errorf("reading payments: %w", interpret(err))
		}
		r.ChainID = uint64(chainID)
		a, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return nil, fmt.Errorf("reading payments: amount %q of payment %d is not an integer", amount, r.ID)
		}
		r.Amount = a
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading payments: %w", interpret(err))
	}
	return out, nil
}
