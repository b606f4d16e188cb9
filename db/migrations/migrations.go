// Package migrations holds burnpoller's schema as embedded SQL files in
// tern's format, and applies them step by step (see MigrateTo): concurrent
// migrators take turns on a row lock only a migrator may take, so that
// several replicas may start at once and no other role can stop them.
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

// LockKey is the advisory lock the previous release's migrators queue on
// (in pg_locks, a session waiting to migrate or migrating). This release
// takes it too when it can, to keep those out, and passes it by when a role
// that may not migrate holds it (see MigrateTo).
const LockKey = 0x6275726e706f6c6c // "burnpoll"

// MigrateTo brings the database to version, up or down (tests use it to
// build older schemas), and returns the version it found. Concurrent
// migrators take turns.
//
// Each step locks the version row (SELECT … FOR UPDATE) and applies its
// migration only if the version is still the one it follows: in the same
// transaction for a migration that runs in one, and from a second session
// holding the row for one that cannot (tern's "disable-tx", for CREATE
// INDEX CONCURRENTLY), whose statements run one by one. A row lock needs
// UPDATE on the version table, which only the migrations' owner has: no
// reader, writer or stranger can take it, where the advisory locks before
// it (tern's, LockKey) could be taken, and held for good, by any role.
//
// Migrators ask for the row with NOWAIT, polled, rather than waiting inside
// a statement: a session blocked in a statement holds a snapshot, and
// CREATE INDEX CONCURRENTLY waits for every older snapshot of the
// database, while the blocked session waits for the index builder's lock.
//
// A database already at version is only read: replicas starting against an
// up-to-date schema take no lock at all. Every transaction a migration runs
// in, and the session holding the row, is bounded by
// idle_in_transaction_session_timeout, so that a migrator that freezes
// (holding its table locks, which every group's writers would queue behind)
// is ended by the server.
func MigrateTo(ctx context.Context, conn *pgx.Conn, version int32) (from int32, err error) {
	if v, err := Current(ctx, conn); err == nil && v == version {
		return v, nil
	}
	steps, err := load()
	if err != nil {
		return 0, err
	}
	if version < 0 || int(version) > len(steps) {
		return 0, fmt.Errorf("no schema version %d: this binary has versions 0 to %d", version, len(steps))
	}
	if err := ensureVersionTable(ctx, conn); err != nil {
		return 0, err
	}
	release, err := queueBehindOlderMigrators(ctx, conn)
	if err != nil {
		return 0, err
	}
	defer func() {
		// Released even when ctx is done; a lost connection releases it too.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := release(uctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	from, err = Current(ctx, conn)
	if err != nil {
		return 0, err
	}
	if err := compare(from); errors.Is(err, ErrTooNew) {
		return from, err
	}
	r := runner{conn: conn, steps: steps}
	for v := from; v != version; {
		if v, err = r.step(ctx, v, version); err != nil {
			return from, fmt.Errorf("migrating from version %d: %w", from, err)
		}
	}
	return from, nil
}

// load reads the embedded migrations in tern's format.
func load() ([]*migrate.Migration, error) {
	// A migrator without a connection only loads: tern takes no lock.
	m, err := migrate.NewMigrator(context.Background(), nil, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("preparing migrator: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return nil, fmt.Errorf("loading migrations: %w", err)
	}
	return m.Migrations, nil
}
