// Package migrations holds burnpoller's schema as embedded SQL files and
// applies them with tern, which serialises concurrent migrators with an
// advisory lock so that several replicas may start at once.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable records the applied schema version.
const VersionTable = "public.burnpoller_schema_version"

var (
	// ErrPending means the database lacks migrations this binary has.
	ErrPending = errors.New("database schema is behind this binary; run `poller migrate`")
	// ErrTooNew means the database was migrated by a newer burnpoller.
	ErrTooNew = errors.New("database schema is newer than this binary; run a newer burnpoller")
)

// Latest is the schema version this binary brings.
func Latest() int32 {
	names, err := migrate.FindMigrations(files)
	if err != nil {
		panic(fmt.Sprintf("embedded migrations: %v", err))
	}
	return int32(len(names))
}

// Querier is what Current needs: a connection, pool or transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Current returns the database's schema version, 0 when nothing was ever
// applied. It only reads, so it works under a role without DDL rights.
func Current(ctx context.Context, q Querier) (int32, error) {
	var v int32
	err := q.QueryRow(ctx, "SELECT version FROM "+VersionTable).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

// Check reports whether the database is exactly at Latest: nil, or an error
// wrapping ErrPending or ErrTooNew.
func Check(ctx context.Context, q Querier) error {
	v, err := Current(ctx, q)
	if err != nil {
		return err
	}
	return compare(v)
}

func compare(v int32) error {
	switch latest := Latest(); {
	case v < latest:
		return fmt.Errorf("%w (database at version %d, binary at %d)", ErrPending, v, latest)
	case v > latest:
		return fmt.Errorf("%w (database at version %d, binary at %d)", ErrTooNew, v, latest)
	}
	return nil
}

// Migrate brings the database up to Latest and returns the version it found.
// It refuses, with ErrTooNew, a database a newer binary migrated.
func Migrate(ctx context.Context, conn *pgx.Conn) (from int32, err error) {
	return MigrateTo(ctx, conn, Latest())
}

// migrateIdleLimit bounds how long a migration's transaction may sit idle
// waiting for its client.
const migrateIdleLimit = "60s"

// LockKey is the advisory lock burnpoller's migrators queue on before tern
// takes its own (in pg_locks, a session waiting to migrate or migrating).
const LockKey = 0x6275726e706f6c6c // "burnpoll"

// MigrateTo brings the database to version (tests use it to build older
// schemas) and returns the version it found. Concurrent migrators take turns.
//
// They queue with pg_try_advisory_lock, polled between short statements,
// rather than waiting inside one: a session blocked in pg_advisory_lock holds
// a snapshot, and CREATE INDEX CONCURRENTLY in a migration waits for every
// older snapshot of the database, while the blocked session waits for the
// lock the index builder's session holds: a deadlock Postgres resolves by
// failing one of them.
//
// A database already at version is only read: replicas starting against an
// up-to-date schema take no lock at all. While migrating, the session's
// transactions are bounded by idle_in_transaction_session_timeout, so that
// a migrator that freezes inside a migration (holding its table locks,
// which every group's writers would queue behind) is ended by the server.
func MigrateTo(ctx context.Context, conn *pgx.Conn, version int32) (from int32, err error) {
	if v, err := Current(ctx, conn); err == nil && v == version {
		return v, nil
	}
	if err := lock(ctx, conn); err != nil {
		return 0, err
	}
	defer func() {
		// Released even when ctx is done; a lost connection releases it too.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, int64(LockKey)); uerr != nil && err == nil {
			err = fmt.Errorf("releasing the migration lock: %w", uerr)
		}
		if _, uerr := conn.Exec(uctx, `RESET idle_in_transaction_session_timeout`); uerr != nil && err == nil {
			err = fmt.Errorf("resetting the migration session: %w", uerr)
		}
	}()
	if _, err := conn.Exec(ctx, `SELECT set_config('idle_in_transaction_session_timeout', $1, false)`, migrateIdleLimit); err != nil {
		return 0, fmt.Errorf("bounding the migration session: %w", err)
	}
	return migrateTo(ctx, conn, version)
}

func lock(ctx context.Context, conn *pgx.Conn) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(LockKey)).Scan(&ok); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another migrator: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func migrateTo(ctx context.Context, conn *pgx.Conn, version int32) (from int32, err error) {
	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return 0, fmt.Errorf("preparing migrator: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return 0, fmt.Errorf("loading migrations: %w", err)
	}
	from, err = m.GetCurrentVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	if err := compare(from); errors.Is(err, ErrTooNew) {
		return from, err
	}
	if err := m.MigrateTo(ctx, version); err != nil {
		return from, fmt.Errorf("migrating from version %d: %w", from, err)
	}
	return from, nil
}
