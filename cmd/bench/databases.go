package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/harness"
)

// The databases of the phases: each run gets one of its own, made afresh
// on -database and dropped when the run ends.

// freshDB creates the database name on admin, dropping any left from an
// earlier run, and returns its URL. migrate applies the schema.
func freshDB(ctx context.Context, admin, name string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// migrate applies the migrations of the poller binary bin (the one under
// test, -poller for paired runs, or the previous release) to the database
// at dbURL, so that the schema is that binary's own; before a timer
// starts, as a deployment migrates once and not at every catch-up.
func migrate(ctx context.Context, bin, dbURL string) error {
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("migrating with %s: %w: %s", bin, err, out)
	}
	return nil
}

// dropDB drops the database name on admin, best effort.
func dropDB(ctx context.Context, admin, name string) {
	if conn, err := pgx.Connect(ctx, admin); err == nil {
		_, _ = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
		conn.Close(ctx)
	}
}

// migratedDB creates the database name afresh on admin, migrates it with
// this tree's migrations (no poller binary: the ceilings run no
// burnpoller code) and returns a connection to it; done closes the
// connection and drops the database.
func migratedDB(ctx context.Context, admin, name string) (*pgx.Conn, func(), error) {
	dbURL, err := freshDB(ctx, admin, name)
	if err != nil {
		return nil, nil, err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		dropDB(ctx, admin, name)
		return nil, nil, err
	}
	done := func() {
		conn.Close(ctx)
		dropDB(ctx, admin, name)
	}
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		done()
		return nil, nil, err
	}
	return conn, done, nil
}

// liveRun is where replicas that follow the sim chain from its next block
// run (the steady state, not a catch-up): a fresh database, the settings
// that start them there, and a directory for their logs.
type liveRun struct {
	dbURL  string
	env    []string
	logDir string
	// done drops the database and removes the logs.
	done func()
}

// liveRun makes the database name afresh (name_ws with ws, whose settings
// also subscribe to newHeads) and a log directory.
func (b *bench) liveRun(ctx context.Context, name string, ws bool) (*liveRun, error) {
	if ws {
		name += "_ws"
	}
	head, err := b.chain.Client().BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	logDir, err := os.MkdirTemp("", "bench-logs-")
	if err != nil {
		return nil, err
	}
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		_ = os.RemoveAll(logDir)
		return nil, err
	}
	r := &liveRun{dbURL: dbURL, logDir: logDir, env: []string{"START_BLOCK=" + strconv.FormatUint(head+1, 10)},
		done: func() { dropDB(ctx, b.admin, name); _ = os.RemoveAll(logDir) }}
	if ws {
		r.env = append(r.env, "RPC_WS_URL="+b.info.WSURL)
	}
	return r, nil
}

// listen connects to dbURL and runs LISTEN channel, trying for up to a
// minute while the replicas create the schema.
func listen(ctx context.Context, dbURL, channel string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if err := harness.WaitFor(ctx, time.Minute, "LISTEN "+channel, func() bool {
		_, err := conn.Exec(ctx, "LISTEN "+channel)
		return err == nil
	}); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// countPayments counts the rows of the payments table.
func countPayments(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n)
	return n, err
}

// cursorOf is the highest last_processed_block in block_cursors; -2 while
// there is none or it cannot be read.
func cursorOf(ctx context.Context, conn *pgx.Conn) int64 {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(last_processed_block), -2) FROM block_cursors`).Scan(&n); err != nil {
		return -2
	}
	return n
}

// groupCursors reads every cursor of the database by id.
func groupCursors(ctx context.Context, conn *pgx.Conn) (map[string]int64, error) {
	rows, err := conn.Query(ctx, `SELECT id, last_processed_block FROM block_cursors`)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var (
			id string
			n  int64
		)
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
