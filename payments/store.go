// Package payments owns burnpoller's ledger in Postgres: the payments table
// and the block cursor whose row lock serialises replicas. Everything a range
// writes goes through one Tx, so the cursor can only cover burns that were
// committed with it.
package payments

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
