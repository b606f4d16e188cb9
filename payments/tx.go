package payments

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/jackc/pgx/v5"
)

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

// SetLimits applies limits to the rest of the transaction: a wait for a
// lock may be long, and the work after it short.
func (t *Tx) SetLimits(ctx context.Context, limits Limits) error {
	t.limits = limits
	return t.bound(ctx)
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

func millis(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
