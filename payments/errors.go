package payments

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
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
