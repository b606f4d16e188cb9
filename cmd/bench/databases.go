package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"

	"github.com/jackc/pgx/v5"
)

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

// migrate applies the poller's migrations to the database at dbURL, with
// the poller under test (-poller, for paired runs), so that the schema is
// its own; before a timer starts, as a deployment migrates once and not at
// every catch-up.
func (b *bench) migrate(ctx context.Context, dbURL string) error {
	cmd := exec.CommandContext(ctx, b.bin, "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("migrating with %s: %w: %s", b.bin, err, out)
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

// countPayments counts the rows of the payments table.
func countPayments(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n)
	return n, err
}
