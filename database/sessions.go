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
// between transactions. One connection sets a session setting; then, round
// after round, a second one holds a transaction open (so that a transaction
// pooler hands the first another server connection when it took the
// first's) while the first reads its backend and the setting back. A
// pooler shows as the first connection on another backend or without its
// setting, or as the second on the first's backend. Another client's
// transaction ending between the steps can give the first its backend back
// in one round, so it takes every round to say yes; a direct connection
// never shows either. It opens and closes two connections of its own.
func KeepsSessions(ctx context.Context, cc *pgx.ConnConfig) (bool, error) {
	// The probe's own statements must pass any pooler: no named prepared
	// statements (which a pooler's next client finds on its server
	// connection as "already exists"), whatever mode cc names.
	cc = cc.Copy()
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
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
	var backend int32
	if err := c1.QueryRow(ctx, `SELECT pg_backend_pid(), set_config('burnpoller.session_probe', $1, false)`, token).Scan(&backend, new(string)); err != nil {
		return false, fmt.Errorf("probing the session: %w", err)
	}
	for range sessionProbeRounds {
		kept, err := probeRound(ctx, c1, c2, backend, token)
		if err != nil || !kept {
			return false, err
		}
	}
	return true, nil
}

// sessionProbeRounds is how many rounds KeepsSessions takes to say yes.
const sessionProbeRounds = 32

// probeRound is one round of KeepsSessions: false when c1 is no longer on
// backend with token set, or c2 is on it. c1 is read twice: while c2 holds
// its transaction, and once c2 has ended it. A pooler that hands out the
// server connection freed last gives c1, on the second read, the one c2
// just let go: without it, a first round in which c2 happened onto the
// other server connection (another client's statement holding c1's) left
// c2 on that one and c1 on its own for every later round, as if each kept
// its session.
func probeRound(ctx context.Context, c1, c2 *pgx.Conn, backend int32, token string) (bool, error) {
	tx, err := c2.Begin(ctx)
	if err != nil {
		// A pooler in statement mode refuses transactions.
		return false, nil
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var other int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&other); err != nil || other == backend {
		return false, nil
	}
	if kept, err := onItsSession(ctx, c1, backend, token); err != nil || !kept {
		return false, err
	}
	if err := tx.Rollback(ctx); err != nil {
		return false, nil
	}
	return onItsSession(ctx, c1, backend, token)
}

// onItsSession says whether c1 is on backend with token set.
func onItsSession(ctx context.Context, c1 *pgx.Conn, backend int32, token string) (bool, error) {
	var (
		now int32
		got string
	)
	if err := c1.QueryRow(ctx, `SELECT pg_backend_pid(), coalesce(current_setting('burnpoller.session_probe', true), '')`).Scan(&now, &got); err != nil {
		return false, fmt.Errorf("probing the session: %w", err)
	}
	return now == backend && got == token, nil
}
