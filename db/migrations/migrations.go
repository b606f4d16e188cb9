// Package migrations holds burnpoller's schema as embedded SQL files and
// applies them with tern, which serialises concurrent migrators with an
// advisory lock so that several replicas may start at once.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"

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
	if err := m.Migrate(ctx); err != nil {
		return from, fmt.Errorf("migrating from version %d: %w", from, err)
	}
	return from, nil
}
