package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

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

// LockCursor locks cursor id for the rest of the transaction and returns it.
// A wait longer than the lock limit gives ErrLockTimeout.
func (t *Tx) LockCursor(ctx context.Context, id string) (Cursor, error) {
	return scanCursor(t.tx.QueryRow(ctx, `
		SELECT id, last_processed_block, coalesce(last_processed_hash, ''), updated_at, rescanned_at, clock_timestamp()
		FROM block_cursors WHERE id = $1 FOR UPDATE`, id), id)
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

// nullable is s, or NULL for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
