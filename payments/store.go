// Package payments owns burnpoller's ledger in Postgres: the payments table
// and the block cursor whose row lock serialises replicas. Everything a range
// writes goes through one Tx, so the cursor can only cover burns that were
// committed with it.
package payments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrLockTimeout means another session holds the cursor row for longer
	// than the lock wait: this replica is standby.
	ErrLockTimeout = errors.New("cursor row is locked by another replica")
	// ErrLockWait means a statement waited longer than the lock wait for
	// a lock other than the cursor row's and the writers' (a table or row
	// another session holds): nothing was written, try again.
	ErrLockWait = errors.New("another session held a lock this transaction needs for longer than the lock wait")
	// ErrCursorNotFound means the cursor row does not exist.
	ErrCursorNotFound = errors.New("cursor not found")
	// ErrCursorMoved means the cursor row no longer holds the value this
	// transaction read; nothing was written.
	ErrCursorMoved = errors.New("cursor moved under the lock")
	// ErrWritersBusy means another writer of the same contract (a
	// backfill beside the live loop, say) held the writers' lock for
	// longer than the lock wait: nothing was written, try again.
	ErrWritersBusy = errors.New("another writer of the contract is recording (the writers' lock)")
	// ErrTimeout means Postgres cancelled a statement or the session for
	// running past statement_timeout or idle_in_transaction_session_timeout.
	ErrTimeout = errors.New("database timeout")
)

// Payment is one burn as the ledger records it. Hex fields are lowercase
// 0x-prefixed; Amount is the exact uint256 value.
type Payment struct {
	ChainID     uint64
	Contract    string
	TxHash      string
	LogIndex    uint32
	BlockNumber int64
	BlockHash   string
	Payer       string
	Digest      string
	Amount      *big.Int
	BurnedAt    time.Time
}

// RejectedLog is a log of the burn event from the burn contract that did
// not decode: recorded, never credited.
type RejectedLog struct {
	ChainID     uint64
	Contract    string
	TxHash      string
	LogIndex    uint32
	BlockNumber int64
	BlockHash   string
	// Raw is the log as the node returned it, as JSON.
	Raw    []byte
	Reason string
}

// Cursor is the position of one poller group: every burn up to and including
// Block is in the ledger. Block is -1 before the first block; Hash is empty
// when the block's hash is not known (a freshly seeded cursor).
type Cursor struct {
	ID        string
	Block     int64
	Hash      string
	UpdatedAt time.Time
	// RescannedAt is when the group last re-read blocks below the cursor;
	// zero if never.
	RescannedAt time.Time
	// Now is the database's clock when the row was read (for a locked
	// row, once the lock was granted).
	Now time.Time
}

// Store is the ledger. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool. The pool stays the caller's to close.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging database: %w", interpret(err))
	}
	return nil
}

// ErrReadOnly means the server refuses writes: a standby, or a primary
// that was demoted. Connections to it are dropped (see the pool's
// OnPgError); readiness says so meanwhile.
var ErrReadOnly = errors.New("database is read-only (a standby?)")

// Writable returns nil when a session of the pool may write, ErrReadOnly
// when the server it reaches refuses writes, or the failure to ask.
func (s *Store) Writable(ctx context.Context) error {
	var ro string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&ro); err != nil {
		return fmt.Errorf("asking the database: %w", interpret(err))
	}
	if ro == "on" {
		return ErrReadOnly
	}
	return nil
}

// SeedCursor creates cursor id at block, with that block's hash ("" when
// unknown), if it does not exist yet, and returns the cursor as it now
// stands; an existing cursor is left as it is.
func (s *Store) SeedCursor(ctx context.Context, id string, block int64, hash string) (Cursor, error) {
	_, err := s.pool.Exec(ctx, `
		INSERT INTO block_cursors (id, last_processed_block, last_processed_hash, updated_at)
		VALUES ($1, $2, $3, now())
		ON CONFLICT (id) DO NOTHING`, id, block, nullable(hash))
	if err != nil {
		return Cursor{}, fmt.Errorf("seeding cursor %q: %w", id, interpret(err))
	}
	return s.Cursor(ctx, id)
}

// Cursor reads cursor id without locking it.
func (s *Store) Cursor(ctx context.Context, id string) (Cursor, error) {
	return scanCursor(s.pool.QueryRow(ctx, `
		SELECT id, last_processed_block, coalesce(last_processed_hash, ''), updated_at, rescanned_at, now()
		FROM block_cursors WHERE id = $1`, id), id)
}

// Cursors reads every cursor, ordered by id.
func (s *Store) Cursors(ctx context.Context) ([]Cursor, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, last_processed_block, coalesce(last_processed_hash, ''), updated_at, rescanned_at, now()
		FROM block_cursors ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("reading cursors: %w", interpret(err))
	}
	defer rows.Close()
	var out []Cursor
	for rows.Next() {
		c, err := scanCursor(rows, "")
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading cursors: %w", interpret(err))
	}
	return out, nil
}

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

// Limits bound a transaction on the server, so that a replica that freezes
// or loses its network can never hold the cursor lock for long: Postgres
// itself ends the statement or the session and releases the lock.
type Limits struct {
	// LockWait bounds the wait for the cursor row lock (lock_timeout).
	LockWait time.Duration
	// TxTimeout bounds every statement (statement_timeout) and every idle gap
	// inside the transaction (idle_in_transaction_session_timeout).
	TxTimeout time.Duration
}

// Tx is one range's transaction: lock, insert, advance, commit.
type Tx struct {
	tx     pgx.Tx
	limits Limits
	// staged is how many events the transaction staged (the last one's
	// place); marked says it left the ledger_commits row saying so
	// (events = true), whose trigger numbers them inside COMMIT. A row of
	// the head alone (SetHead) says events = false and does not count.
	staged int64
	marked bool
}

// writerSchema is the schema this binary's writers declare (see Begin).
var writerSchema = strconv.Itoa(int(migrations.Latest()))

// Begin opens a transaction with limits applied to it alone.
func (s *Store) Begin(ctx context.Context, limits Limits) (*Tx, error) {
	// Read committed whatever the server's default: a later statement must
	// see what another writer committed while this one waited for a lock.
	// The limits are in force from BEGIN on, and so is the declaration of
	// the schema this writer speaks, which a contract step checks before
	// it lets a burnpoller session write.
	tx, err := s.pool.BeginTx(ctx, database.BeginBounded(
		database.Bound{Setting: "lock_timeout", Limit: limits.LockWait},
		database.Bound{Setting: "statement_timeout", Limit: limits.TxTimeout},
		database.Bound{Setting: "idle_in_transaction_session_timeout", Limit: limits.TxTimeout},
		database.Bound{Setting: migrations.WriterSetting, Value: writerSchema}))
	if err != nil {
		return nil, fmt.Errorf("beginning transaction: %w", interpret(err))
	}
	return &Tx{tx: tx, limits: limits}, nil
}

// bound applies the limits to the rest of the transaction.
func (t *Tx) bound(ctx context.Context) error {
	// set_config(..., true) is SET LOCAL with parameters: it ends with the transaction.
	_, err := t.tx.Exec(ctx, `SELECT
		set_config('lock_timeout', $1, true),
		set_config('statement_timeout', $2, true),
		set_config('idle_in_transaction_session_timeout', $2, true)`,
		millis(t.limits.LockWait), millis(t.limits.TxTimeout))
	if err != nil {
		return fmt.Errorf("bounding transaction: %w", interpret(err))
	}
	return nil
}

// LockCursor locks cursor id for the rest of the transaction and returns it.
// A wait longer than the lock limit gives ErrLockTimeout.
func (t *Tx) LockCursor(ctx context.Context, id string) (Cursor, error) {
	return scanCursor(t.tx.QueryRow(ctx, `
		SELECT id, last_processed_block, coalesce(last_processed_hash, ''), updated_at, rescanned_at, clock_timestamp()
		FROM block_cursors WHERE id = $1 FOR UPDATE`, id), id)
}

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

// InsertRejected records rs in one statement, keeping the first sighting of
// each (chain_id, contract, tx_hash, log_index), and returns how many were
// new.
func (t *Tx) InsertRejected(ctx context.Context, rs []RejectedLog) (int64, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	var (
		chainIDs  = make([]int64, len(rs))
		contracts = make([]string, len(rs))
		txHashes  = make([]string, len(rs))
		indexes   = make([]int64, len(rs))
		numbers   = make([]int64, len(rs))
		hashes    = make([]string, len(rs))
		raws      = make([]string, len(rs))
		reasons   = make([]string, len(rs))
	)
	for i, r := range rs {
		if r.ChainID > 1<<63-1 {
			return 0, fmt.Errorf("rejected log %s/%d: chain id %d out of range", r.TxHash, r.LogIndex, r.ChainID)
		}
		chainIDs[i], contracts[i], txHashes[i] = int64(r.ChainID), r.Contract, r.TxHash
		indexes[i], numbers[i], hashes[i] = int64(r.LogIndex), r.BlockNumber, r.BlockHash
		raws[i], reasons[i] = string(r.Raw), r.Reason
	}
	tag, err := t.tx.Exec(ctx, `
		INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		SELECT chain_id, contract, tx_hash, log_index, block_number, block_hash, raw::jsonb, reason
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::text[], $8::text[])
		     AS r(chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		ON CONFLICT (chain_id, contract, tx_hash, log_index) DO NOTHING`,
		chainIDs, contracts, txHashes, indexes, numbers, hashes, raws, reasons)
	if err != nil {
		return 0, fmt.Errorf("recording %d rejected logs: %w", len(rs), interpret(err))
	}
	return tag.RowsAffected(), nil
}

// MoveCursor sets cursor id, which this transaction has locked, from block
// from to block to with hash ("" for unknown). It fails with ErrCursorMoved,
// writing nothing, if the cursor is no longer at from. It is the only way a
// cursor moves; the rules of when it may (forward only as ranges are
// recorded; backwards or forward by an operator's reset) are the caller's.
func (t *Tx) MoveCursor(ctx context.Context, id string, from, to int64, hash string) error {
	tag, err := t.tx.Exec(ctx, `
		UPDATE block_cursors
		SET last_processed_block = $3, last_processed_hash = $4, updated_at = clock_timestamp()
		WHERE id = $1 AND last_processed_block = $2`, id, from, to, nullable(hash))
	if err != nil {
		return fmt.Errorf("moving cursor %q to %d: %w", id, to, interpret(err))
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("moving cursor %q from %d: %w", id, from, ErrCursorMoved)
	}
	return nil
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

// SetLimits applies limits to the rest of the transaction: a wait for a
// lock may be long, and the work after it short.
func (t *Tx) SetLimits(ctx context.Context, limits Limits) error {
	t.limits = limits
	return t.bound(ctx)
}

// LockWriters waits, within the lock limit, until no other transaction is
// recording payments of contracts on chain chainID, and keeps them from
// starting until this one ends. Writers of the same contract lock different
// cursor rows (the live group's, a backfill's); without this, two of them
// could each check the ledger before the other's rows commit.
//
// The lock is the contracts' rows of writer_locks, taken FOR UPDATE in
// contract order: a row lock needs UPDATE there, which only the writers
// have, so no reader can hold it (an advisory lock, which any role may
// take, could be held by a consumer's session for as long as it lives).
// A contract's row is added the first time one of its writers locks it.
//
// Until every replica runs this release, the writers of the previous one,
// which take an advisory lock alone, are kept out by taking it too, unless
// its holder's role may not insert payments: such a session is no writer,
// and waiting for it would hand every role the right to stop the writers.
func (t *Tx) LockWriters(ctx context.Context, chainID uint64, contracts []string) error {
	keys := slices.Clone(contracts)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	started, added := time.Now(), false
	for {
		locked, free, err := t.lockWriterRows(ctx, chainID, keys)
		switch {
		case err == nil && locked < len(keys) && !added:
			// A contract's first writer adds its row: one waiting on this
			// insert finds the row once this transaction ends, and locks it.
			_, err = t.tx.Exec(ctx, `INSERT INTO writer_locks (chain_id, contract)
				SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, int64(chainID), keys)
			added = true
		case err == nil && locked < len(keys):
			err = fmt.Errorf("locked %d of %d writer rows", locked, len(keys))
		case err == nil && free:
			return nil
		case err == nil && t.limits.LockWait > 0 && time.Since(started) >= t.limits.LockWait:
			err = fmt.Errorf("%w: a writer of the previous release held its advisory lock for %s", ErrWritersBusy, t.limits.LockWait)
		case err == nil:
			err = sleepCtx(ctx, legacyWriterPoll)
		}
		if err != nil {
			return fmt.Errorf("waiting for the other writers of contracts %v: %w", keys, interpretLock(err, ErrWritersBusy))
		}
	}
}

// legacyWriterPoll is how often a writer asks again for the previous
// release's advisory lock while a writer of that release holds it.
const legacyWriterPoll = 20 * time.Millisecond

// lockWriterRows locks the rows of writer_locks of contracts, in contract
// order so that writers of overlapping sets cannot deadlock, and counts
// them; then, row by locked row, it tries the advisory lock the previous
// release's writers take: free is false while a session whose role may
// insert payments holds one of them.
func (t *Tx) lockWriterRows(ctx context.Context, chainID uint64, contracts []string) (locked int, free bool, err error) {
	err = t.tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_and(
			CASE WHEN pg_try_advisory_xact_lock(w.key) THEN true
			ELSE NOT EXISTS (
				SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
				  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				  AND l.classid = ((w.key >> 32) & 4294967295)::oid
				  AND l.objid = (w.key & 4294967295)::oid
				  AND has_table_privilege(a.usesysid, 'payments', 'INSERT'))
			END), true)
		FROM (SELECT hashtextextended('burnpoller writers ' || $3 || ' ' || contract, 0) AS key
		      FROM writer_locks WHERE chain_id = $1 AND contract = ANY($2)
		      ORDER BY contract FOR UPDATE) AS w`,
		int64(chainID), contracts, strconv.FormatUint(chainID, 10)).Scan(&locked, &free)
	return locked, free, err
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

// MarkPolled records, with the transaction, that the group read the chain
// ago before now (when its read of the target began) and left cursor id at
// the finality target: another replica taking the row within a poll
// interval may skip its read (poller.Loop).
func (t *Tx) MarkPolled(ctx context.Context, id string, ago time.Duration) error {
	if _, err := t.tx.Exec(ctx, `UPDATE block_cursors SET polled_at = clock_timestamp() - $2::interval WHERE id = $1`,
		id, ago); err != nil {
		return fmt.Errorf("marking cursor %q polled: %w", id, interpret(err))
	}
	return nil
}

// PolledAge is how long ago, by the database's clock now, the group last
// read the chain for cursor id (see MarkPolled); ok is false if never.
func (t *Tx) PolledAge(ctx context.Context, id string) (age time.Duration, ok bool, err error) {
	var a *time.Duration
	if err := t.tx.QueryRow(ctx, `SELECT clock_timestamp() - polled_at FROM block_cursors WHERE id = $1`, id).Scan(&a); err != nil {
		return 0, false, fmt.Errorf("reading when cursor %q was polled: %w", id, interpret(err))
	}
	if a == nil {
		return 0, false, nil
	}
	return *a, true, nil
}

// MarkRescanned records that the group re-read the blocks below cursor id now.
func (t *Tx) MarkRescanned(ctx context.Context, id string) error {
	if _, err := t.tx.Exec(ctx, `UPDATE block_cursors SET rescanned_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("marking cursor %q rescanned: %w", id, interpret(err))
	}
	return nil
}

// DatabaseUser returns the role this transaction runs as.
func (t *Tx) DatabaseUser(ctx context.Context) (string, error) {
	var u string
	if err := t.tx.QueryRow(ctx, `SELECT current_user`).Scan(&u); err != nil {
		return "", fmt.Errorf("reading current user: %w", interpret(err))
	}
	return u, nil
}

// Commit commits the transaction. An error means nothing of it was committed
// (or, if the connection died during COMMIT, the outcome is unknown to this
// process, and the ledger is consistent either way).
func (t *Tx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", interpret(err))
	}
	return nil
}

// Rollback ends the transaction without writing. It is safe after Commit
// and bounded in time even when the database has gone away.
func (t *Tx) Rollback() {
	rollback(t.tx)
}

func rollback(tx pgx.Tx) {
	// Detached from the caller's context, which may be cancelled already; a
	// rollback that cannot reach the server closes the connection, which
	// ends the transaction on the server as surely.
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	_ = tx.Rollback(ctx)
}

func scanCursor(row pgx.Row, id string) (Cursor, error) {
	var (
		c         Cursor
		rescanned *time.Time
	)
	err := row.Scan(&c.ID, &c.Block, &c.Hash, &c.UpdatedAt, &rescanned, &c.Now)
	if rescanned != nil {
		c.RescannedAt = *rescanned
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, fmt.Errorf("cursor %q: %w", id, ErrCursorNotFound)
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("reading cursor %q: %w", id, interpretLock(err, ErrLockTimeout))
	}
	return c, nil
}

// interpret maps the SQLSTATEs the poller must tell apart to our errors,
// keeping the original error in the chain; a lock wait over lock_timeout is
// ErrLockWait.
func interpret(err error) error { return interpretLock(err, ErrLockWait) }

// interpretLock is interpret for a statement whose lock wait has its own
// name: the cursor row's (ErrLockTimeout), the writers' (ErrWritersBusy).
func interpretLock(err, lockWait error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "55P03": // lock_not_available: lock_timeout expired
		return fmt.Errorf("%w: %w", lockWait, err)
	case "57014", "25P03": // query_canceled (statement_timeout), idle_in_transaction_session_timeout
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return err
}

// nullable is s, or NULL for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
