// Package migrations holds burnpoller's schema as embedded SQL files in
// tern's format, and applies them step by step (see MigrateTo): concurrent
// migrators take turns on a row lock only a migrator may take, so that
// several replicas may start at once and no other role can stop them.
package migrations

import (
	"cmp"
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
	// ErrPending means the database lacks migrations this binary needs.
	ErrPending = errors.New("database schema is behind this binary; run `poller migrate`")
	// ErrTooNew means a newer burnpoller's contract step retired this
	// binary's release (or the database is beyond what any release can
	// read).
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

// Check reports whether this binary can run against the database: nil, or
// an error wrapping ErrPending (a migration it needs is missing: every one
// up to Compatible) or ErrTooNew (a later release's contract step retired
// it). A database a later release migrated further is fine until then:
// its migrations only added to what this release names.
func Check(ctx context.Context, q Querier) error {
	v, err := Current(ctx, q)
	if err != nil {
		return err
	}
	if v < Compatible() {
		return fmt.Errorf("%w (database at version %d, binary needs %d)", ErrPending, v, Compatible())
	}
	return retired(ctx, q, v)
}

// retired says whether a contract step the database has applied, at
// version v, retired this binary's release: a step beyond Latest.
func retired(ctx context.Context, q Querier, v int32) error {
	if v <= Latest() {
		return nil
	}
	var (
		step    *int32
		release *string
	)
	err := q.QueryRow(ctx, `SELECT version, release FROM schema_contracts WHERE version > $1 ORDER BY version DESC LIMIT 1`,
		Latest()).Scan(&step, &release)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return nil
	case err != nil:
		return fmt.Errorf("reading the contract steps applied: %w", err)
	}
	return fmt.Errorf("%w: contract step %d retired the releases before schema %d (database at version %d, binary at %d); roll to burnpoller %s or later",
		ErrTooNew, *step, *step, v, Latest(), *release)
}

// Contract is what a migration does with a contract step while replicas of
// an older release live (OlderReplicas).
type Contract int

const (
	// ContractWhenFree runs a contract step only while none lives, and
	// otherwise stops before it, leaving it pending (Result.Pending).
	ContractWhenFree Contract = iota
	// ContractWait waits until none lives, telling Options.Waiting why,
	// then runs it.
	ContractWait
	// ContractForce runs it whatever lives: the older replicas' writes are
	// refused from then on.
	ContractForce
	// ContractNever leaves every contract step pending: a replica's
	// start-up migration, whose role may not run one, and which must not
	// retire what it has not looked at for long.
	ContractNever
)

// Options are a migration's.
type Options struct {
	Contract Contract
	// Release is this binary's release (poller version), recorded with a
	// contract step as the release an older replica is to roll to.
	Release string
	// Waiting, if set, hears why a ContractWait migration waits, each time
	// it looks.
	Waiting func(*Pending)
	// Poll is how often a ContractWait migration looks again (2 s if 0).
	Poll time.Duration
	// Quiet, under ContractWhenFree and ContractWait, is how long nothing
	// of an older release may be seen, looked for every second, before a
	// contract step runs: a replica reconnecting, or between two polls
	// behind a pooler, shows again within it. Zero looks once.
	Quiet time.Duration
	// Applied, if set, hears of each step applied: the version it brought
	// the database to, its migration and how long it took (its lock
	// waits and retries included).
	Applied func(version int32, name string, took time.Duration)
}

// Result is what a migration did.
type Result struct {
	// From and To are the versions the database was at and is at now.
	From, To int32
	// Pending is the contract step left pending, nil when none.
	Pending *Pending
}

// Migrate brings the database up to Latest, short of a contract step
// while a replica of an older release lives, and returns the version it
// found. It refuses, with ErrTooNew, a database whose contract steps
// retired this release.
func Migrate(ctx context.Context, conn *pgx.Conn) (from int32, err error) {
	r, err := Apply(ctx, conn, Latest(), Options{})
	return r.From, err
}

// MigrateTo brings the database to version, up or down, contract steps
// included (tests build older schemas with it), and returns the version it
// found.
func MigrateTo(ctx context.Context, conn *pgx.Conn, version int32) (from int32, err error) {
	r, err := Apply(ctx, conn, version, Options{Contract: ContractForce})
	return r.From, err
}

// LockKey is the advisory lock the previous release's migrators queue on
// (in pg_locks, a session waiting to migrate or migrating). This release
// takes it too when it can, to keep those out, and passes it by when a role
// that may not migrate holds it (see Apply).
const LockKey = 0x6275726e706f6c6c // "burnpoll"

// Apply brings the database to version, up or down, treating contract
// steps as opts says. Concurrent migrators take turns.
//
// Each step holds the version row (FOR UPDATE) and applies its migration
// only if the version is still the one it follows: in the same
// transaction for a migration that runs in one, and from a second session
// holding the row for one that cannot (tern's "disable-tx", for CREATE
// INDEX CONCURRENTLY), whose statements run one by one. That lock needs
// UPDATE on the version table, which only the migrations' owner has, and
// nothing a role without it may take stands in its way (see lockVersion):
// the advisory locks before it (tern's, LockKey) could be taken, and held
// for good, by any role. A step whose own lock waits out its lock_timeout
// (writers in the way) is tried again, a few times.
//
// Migrators ask for the lock with NOWAIT, polled, rather than waiting
// inside a statement: a session blocked in a statement holds a snapshot,
// and CREATE INDEX CONCURRENTLY waits for every older snapshot of the
// database, while the blocked session waits for the index builder's lock.
//
// A database already at version is only read: replicas starting against an
// up-to-date schema take no lock at all. Every transaction a migration runs
// in, and the session holding the lock, is bounded by
// idle_in_transaction_session_timeout, so that a migrator that freezes
// (holding its table locks, which every group's writers would queue behind)
// is ended by the server.
func Apply(ctx context.Context, conn *pgx.Conn, version int32, opts Options) (Result, error) {
	if opts.Contract != ContractWait {
		return applyOnce(ctx, conn, version, opts)
	}
	// Waiting holds nothing: each look is a migration of its own that
	// stops before the contract step, so that no other migrator (a
	// replica starting) waits behind this one meanwhile.
	opts.Contract = ContractWhenFree
	first := int32(-1)
	for {
		res, err := applyOnce(ctx, conn, version, opts)
		if first < 0 {
			first = res.From
		}
		res.From = first
		if err != nil || res.Pending == nil {
			return res, err
		}
		if opts.Waiting != nil {
			opts.Waiting(res.Pending)
		}
		if err := sleep(ctx, cmp.Or(opts.Poll, 2*time.Second)); err != nil {
			return res, fmt.Errorf("waiting for the replicas of older releases to go: %w", err)
		}
	}
}

// applyOnce is Apply, leaving a contract step pending under
// ContractWhenFree.
func applyOnce(ctx context.Context, conn *pgx.Conn, version int32, opts Options) (res Result, err error) {
	if v, err := Current(ctx, conn); err == nil && (v == version || v > Latest() && version == Latest()) {
		return Result{From: v, To: v}, retired(ctx, conn, v)
	}
	steps, err := load()
	if err != nil {
		return Result{}, err
	}
	if version < 0 || int(version) > len(steps) {
		return Result{}, fmt.Errorf("no schema version %d: this binary has versions 0 to %d", version, len(steps))
	}
	if err := ensureVersionTable(ctx, conn); err != nil {
		return Result{}, err
	}
	release, err := queueBehindOlderMigrators(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		// Released even when ctx is done; a lost connection releases it too.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := release(uctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	from, err := Current(ctx, conn)
	if err != nil {
		return Result{}, err
	}
	res = Result{From: from, To: from}
	if from > Latest() {
		// A later release migrated further: nothing for this one to do.
		return res, retired(ctx, conn, from)
	}
	r := runner{conn: conn, steps: steps, opts: opts, fresh: from == 0}
	for res.To != version {
		v, pending, err := r.step(ctx, res.To, version)
		res.To = v
		if err != nil {
			return res, fmt.Errorf("migrating from version %d: %w", from, err)
		}
		if pending != nil {
			res.Pending = pending
			return res, nil
		}
	}
	return res, nil
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
