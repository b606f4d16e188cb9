package database

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNoSessions means a connection string reaches Postgres through a pooler
// that hands each transaction to whichever server connection is free
// (PgBouncer, RDS Proxy or Supavisor in transaction mode): session state
// does not last from one transaction to the next, so a session lock (the
// migrations') or LISTEN cannot work through it.
var ErrNoSessions = errors.New("the connection does not keep session state between transactions (a pooler in transaction mode?)")

// KeepsSessions reports whether connections made with cc keep their session
// between transactions: it sets a session setting on one connection, holds
// a transaction open on a second one (so that a transaction pooler must
// hand the first another server connection), and reads the setting back on
// the first. It opens and closes two connections of its own.
func KeepsSessions(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	c1, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer c1.Close(context.WithoutCancel(ctx))
	c2, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer c2.Close(context.WithoutCancel(ctx))
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	if _, err := c1.Exec(ctx, `SELECT set_config('burnpoller.session_probe', $1, false)`, token); err != nil {
		return false, fmt.Errorf("probing the session: %w", err)
	}
	tx, err := c2.Begin(ctx)
	if err != nil {
		// A pooler in statement mode refuses transactions.
		return false, nil
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		return false, nil
	}
	var got string
	if err := c1.QueryRow(ctx, `SELECT coalesce(current_setting('burnpoller.session_probe', true), '')`).Scan(&got); err != nil {
		return false, fmt.Errorf("probing the session: %w", err)
	}
	return got == token, nil
}
