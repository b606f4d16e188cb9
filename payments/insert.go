package payments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Inserted is a payment this transaction inserted, with its id.
type Inserted struct {
	ID int64
	Payment
}

// ErrRecorded means InsertNewPayments met a payment already recorded: the
// statement failed and wrote nothing (the transaction is aborted).
var ErrRecorded = errors.New("a payment taken for new is recorded already")

// InsertNewPayments is InsertPayments for payments the caller knows are
// not recorded (it read the ledger's rows of their blocks and transactions
// under the writers' lock), without the check for a recorded key before
// each row that ON CONFLICT costs. They go in with COPY, the cheapest way
// into a table: their ids are taken from the table's identity sequence
// first (one statement), the payments are copied with them, and their
// confirmed events are copied into the staging table from which COMMIT
// numbers them, in the places InsertPayments gives them. COPY streams its
// rows: the memory it takes does not grow with the range. The unique key
// still guards the ledger: a payment recorded after all (or given twice)
// fails the copy with ErrRecorded and aborts the transaction, so nothing of
// it, earlier statements included, can commit.
func (t *Tx) InsertNewPayments(ctx context.Context, ps []Payment) ([]Inserted, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	for _, p := range ps {
		if err := storable("payment", p); err != nil {
			return nil, err
		}
	}
	ids, err := t.paymentIDs(ctx, len(ps))
	if err != nil {
		return nil, fmt.Errorf("inserting %d payments: %w", len(ps), err)
	}
	amount := func(p Payment) pgtype.Numeric { return pgtype.Numeric{Int: p.Amount, Valid: true} }
	if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{"payments"}, paymentCopyColumns,
		pgx.CopyFromSlice(len(ps), func(i int) ([]any, error) {
			p := ps[i]
			return []any{ids[i], int64(p.ChainID), p.Contract, p.TxHash, int32(p.LogIndex), p.BlockNumber, p.BlockHash,
				p.Payer, p.Digest, amount(p), p.BurnedAt}, nil
		})); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "payments_live_key" {
			return nil, fmt.Errorf("inserting %d payments: %w: %w", len(ps), ErrRecorded, err)
		}
		return nil, fmt.Errorf("inserting %d payments: %w", len(ps), interpret(err))
	}
	// The events take their places in chain order, as InsertPayments
	// stages them.
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(ps[a].BlockNumber, ps[b].BlockNumber), cmp.Compare(ps[a].LogIndex, ps[b].LogIndex),
			cmp.Compare(ids[a], ids[b]))
	})
	if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{"payment_events_staged"}, stagedCopyColumns,
		pgx.CopyFromSlice(len(order), func(k int) ([]any, error) {
			p := ps[order[k]]
			return []any{t.staged + int64(k) + 1, EventID(p.ChainID, p.TxHash, p.LogIndex, KindConfirmed, p.BlockHash),
				KindConfirmed, int64(p.ChainID), p.Contract, p.TxHash, int32(p.LogIndex), p.BlockNumber, p.BlockHash,
				p.Payer, p.Digest, amount(p), p.BurnedAt, ids[order[k]]}, nil
		})); err != nil {
		return nil, fmt.Errorf("staging the events of %d payments: %w", len(ps), interpret(err))
	}
	if err := t.mark(ctx); err != nil {
		return nil, err
	}
	t.staged += int64(len(ps))
	inserted := make([]Inserted, len(ps))
	for i, p := range ps {
		inserted[i] = Inserted{ID: ids[i], Payment: p}
	}
	return inserted, nil
}

// The columns InsertNewPayments copies, in the order of its rows.
var (
	paymentCopyColumns = []string{"id", "chain_id", "contract", "tx_hash", "log_index", "block_number", "block_hash",
		"payer", "digest", "amount", "burned_at"}
	stagedCopyColumns = []string{"ord", "event_id", "kind", "chain_id", "contract", "tx_hash", "log_index",
		"block_number", "block_hash", "payer", "digest", "amount", "burned_at", "payment_id"}
)

// paymentIDs takes n ids from the payments table's identity sequence, in
// increasing order: the ids the table would have given n rows inserted
// now. The sequence is looked up once (MATERIALIZED): inlined, the lookup
// would run for every id and cost more than the insert.
func (t *Tx) paymentIDs(ctx context.Context, n int) ([]int64, error) {
	rows, err := t.tx.Query(ctx, `
		WITH s AS MATERIALIZED (SELECT pg_get_serial_sequence('payments', 'id')::regclass AS seq)
		SELECT nextval(s.seq) FROM s, generate_series(1, $1::int) ORDER BY 1`, n)
	if err != nil {
		return nil, fmt.Errorf("taking payment ids: %w", interpret(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("taking payment ids: %w", interpret(err))
	}
	if len(ids) != n {
		return nil, fmt.Errorf("taking payment ids: got %d of %d", len(ids), n)
	}
	return ids, nil
}

// mark leaves, once per transaction, the ledger_commits row saying it
// staged events, whose deferred trigger numbers them inside COMMIT.
func (t *Tx) mark(ctx context.Context) error {
	if t.marked {
		return nil
	}
	if _, err := t.tx.Exec(ctx, `INSERT INTO ledger_commits (events) VALUES (true)`); err != nil {
		return fmt.Errorf("marking the transaction's events: %w", interpret(err))
	}
	t.marked = true
	return nil
}

// InsertPayments inserts ps, skipping any whose
// (chain_id, contract, tx_hash, log_index) is already recorded (and not
// orphaned),
// stages each inserted payment's confirmed event in the same statement
// (numbered at commit after the transaction's earlier events, in chain
// order), and
// returns the ones it inserted, with their ids, in id order. It and
// InsertNewPayments are the only ways a payment enters the ledger, and
// both stage its event with it, so no payment goes without its event.
func (t *Tx) InsertPayments(ctx context.Context, ps []Payment) ([]Inserted, error) {
	// Every payment is checked before the first statement: one that
	// cannot be stored writes none.
	for _, p := range ps {
		if err := storable("payment", p); err != nil {
			return nil, err
		}
	}
	var inserted []Inserted
	for chunk := range slices.Chunk(ps, insertChunk) {
		ins, err := t.insertChunk(ctx, chunk)
		if err != nil {
			return nil, err
		}
		inserted = append(inserted, ins...)
	}
	return inserted, nil
}

// insertChunk is the most payments one insert statement carries. A range
// of blocks of thousands of burns is inserted as several statements, so
// that the parameters pgx encodes (about a kilobyte a payment, in buffers
// that double as they grow) stay a few megabytes, whatever a block holds;
// at this size a statement's own cost is a few percent of its rows'
// (BENCHMARKS.md).
const insertChunk = 1000

// insertChunk inserts ps in one statement, skipping the recorded ones (see
// InsertPayments).
func (t *Tx) insertChunk(ctx context.Context, ps []Payment) ([]Inserted, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	cols := newColumns(len(ps))
	byKey := make(map[Key]int, len(ps))
	for i, p := range ps {
		if err := cols.add("payment", p); err != nil {
			return nil, err
		}
		byKey[p.Key()] = i
	}
	// The confirmed events are built from the inserted rows themselves and
	// staged, after the transaction's earlier events in chain order, to be
	// numbered inside COMMIT (see AppendEvents); one already recorded (a
	// burn confirmed at this position before, its payment since orphaned)
	// is skipped then without using a seq.
	rows, err := t.tx.Query(ctx, `
		WITH ins AS (
			INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash,
			                      payer, digest, amount, burned_at)
			SELECT chain_id, contract, tx_hash, log_index, block_number, block_hash,
			       payer, digest, amount::numeric(78,0), burned_at
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[],
			            $7::text[], $8::text[], $9::text[], $10::timestamptz[])
			     AS p(chain_id, contract, tx_hash, log_index, block_number, block_hash,
			          payer, digest, amount, burned_at)
			ON CONFLICT (chain_id, contract, tx_hash, log_index) WHERE orphaned_at IS NULL DO NOTHING
			RETURNING id, chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at
		), ev AS (
			INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
			                                   block_hash, payer, digest, amount, burned_at, payment_id)
			SELECT $11 + row_number() OVER (ORDER BY i.block_number, i.log_index, i.id),
			       i.chain_id || ':' || i.tx_hash || ':' || i.log_index || ':confirmed:' || i.block_hash, 'confirmed',
			       i.chain_id, i.contract, i.tx_hash, i.log_index, i.block_number, i.block_hash, i.payer, i.digest,
			       i.amount, i.burned_at, i.id
			FROM ins i
		), mark AS (
			INSERT INTO ledger_commits (events) SELECT true WHERE NOT $12::bool AND EXISTS (SELECT 1 FROM ins)
		)
		SELECT ins.id, ins.contract, ins.tx_hash, ins.log_index FROM ins`,
		append(cols.args(), t.staged, t.marked)...)
	if err != nil {
		return nil, fmt.Errorf("inserting %d payments: %w", len(ps), interpret(err))
	}
	defer rows.Close()
	var inserted []Inserted
	for rows.Next() {
		var (
			id  int64
			key Key
		)
		if err := rows.Scan(&id, &key.Contract, &key.TxHash, &key.LogIndex); err != nil {
			return nil, fmt.Errorf("inserting %d payments: %w", len(ps), interpret(err))
		}
		inserted = append(inserted, Inserted{ID: id, Payment: ps[byKey[key]]})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inserting %d payments: %w", len(ps), interpret(err))
	}
	if len(inserted) > 0 {
		t.staged += int64(len(inserted))
		t.marked = true
	}
	slices.SortFunc(inserted, func(a, b Inserted) int { return cmp.Compare(a.ID, b.ID) })
	return inserted, nil
}
