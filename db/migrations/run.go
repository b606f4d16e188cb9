package migrations

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

// idleLimit bounds how long a migration's transaction, or the session
// holding the version row for one that runs outside a transaction, may sit
// idle waiting for its client.
const idleLimit = "60s"

// heartbeat is how often the session holding the version row, idle while
// the migration's statements run, tells the server its client is alive
// (well within idleLimit).
const heartbeat = 15 * time.Second

// poll is how often a migrator asks again for a lock another one holds.
const poll = 100 * time.Millisecond

// disableTx is tern's marker for a migration that runs outside a
// transaction, statement by statement.
var disableTx = regexp.MustCompile(`(?m)^---- tern: disable-tx ----$`)

// runner applies migrations steps[0..] on conn, one step at a time.
type runner struct {
	conn  *pgx.Conn
	steps []*migrate.Migration
	opts  Options
	// fresh says the database had no schema when this migration began:
	// no release, older or not, has run against it, so a contract step
	// needs no quiet time.
	fresh bool
}

// lockRetries is how many times a step whose lock waited out its
// lock_timeout is tried again, lockBackoff apart: the writers it queued
// behind have moved on by then.
const (
	lockRetries = 20
	lockBackoff = 500 * time.Millisecond
)

// step moves the database one version from v toward target, unless another
// migrator moved it first, and returns the version it is at now; a
// contract step it may not run yet is returned as pending, with v.
func (r runner) step(ctx context.Context, v, target int32) (int32, *Pending, error) {
	if target < v {
		m := r.steps[v-1]
		if m.DownSQL == "" {
			return v, nil, fmt.Errorf("migration %s cannot be undone", m.Name)
		}
		to, err := r.apply(ctx, v, v-1, m.Name, m.DownSQL, nil)
		return to, nil, err
	}
	m := r.steps[v]
	if !isContract(m) {
		to, err := r.apply(ctx, v, v+1, m.Name, m.UpSQL, nil)
		return to, nil, err
	}
	if r.opts.Contract == ContractNever {
		return v, &Pending{Version: v + 1, Name: m.Name}, nil
	}
	older, err := r.olderFor(ctx, v+1)
	if err != nil || (len(older) > 0 && r.opts.Contract != ContractForce) {
		return v, &Pending{Version: v + 1, Name: m.Name, Older: older}, err
	}
	release := cmp.Or(r.opts.Release, "of schema "+strconv.Itoa(int(v+1)))
	to, err := r.apply(ctx, v, v+1, m.Name, m.UpSQL, func(tx pgx.Tx) error {
		return recordContract(ctx, tx, v+1, m.Name, release, older)
	})
	return to, nil, err
}

// olderFor is what lives of releases before version, looked for once, or,
// but under ContractForce or on a fresh database, every second for Quiet
// while nothing is seen.
func (r runner) olderFor(ctx context.Context, version int32) ([]string, error) {
	deadline := time.Now()
	if !r.fresh {
		deadline = deadline.Add(r.opts.Quiet)
	}
	for {
		older, err := OlderReplicas(ctx, r.conn, version)
		if err != nil || len(older) > 0 || r.opts.Contract == ContractForce || !time.Now().Before(deadline) {
			return older, err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// apply runs sql, which moves the database from version v to to, and
// then, in the same transaction, after (when set); a lock_timeout it meets
// is tried again.
func (r runner) apply(ctx context.Context, v, to int32, name, sql string, after func(pgx.Tx) error) (int32, error) {
	started := time.Now()
	got, err := r.attempts(ctx, v, to, name, sql, after)
	if err == nil && got == to && r.opts.Applied != nil {
		r.opts.Applied(to, name, time.Since(started))
	}
	return got, err
}

// attempts is apply's loop of tries.
func (r runner) attempts(ctx context.Context, v, to int32, name, sql string, after func(pgx.Tx) error) (int32, error) {
	for attempt := 0; ; attempt++ {
		var got int32
		var err error
		if disableTx.MatchString(sql) {
			got, err = r.outsideTx(ctx, v, to, name, sql, after)
		} else {
			got, err = r.inTx(ctx, v, to, name, sql, after)
		}
		if !lockNotAvailable(err) || attempt == lockRetries {
			return got, err
		}
		if sleep(ctx, lockBackoff) != nil {
			return got, err
		}
	}
}

// inTx applies sql, moving the version from v to to, in one transaction
// holding the version table.
func (r runner) inTx(ctx context.Context, v, to int32, name, sql string, after func(pgx.Tx) error) (int32, error) {
	tx, cur, err := lockVersion(ctx, r.conn)
	if err != nil {
		return v, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if cur != v {
		return cur, nil
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return v, fmt.Errorf("migration %s: %w", name, err)
	}
	return finish(ctx, tx, v, to, name, after)
}

// outsideTx applies sql statement by statement on the migrator's session
// while a second session holds the version row, and moves the version from
// v to to from that second session once every statement ran. A migration
// cut short runs again from its first statement: such migrations are
// written so that running one again completes it.
func (r runner) outsideTx(ctx context.Context, v, to int32, name, sql string, after func(pgx.Tx) error) (int32, error) {
	lock, err := pgx.ConnectConfig(ctx, r.conn.Config())
	if err != nil {
		return v, fmt.Errorf("opening the session that holds the schema version: %w", err)
	}
	defer func() { _ = lock.Close(context.WithoutCancel(ctx)) }()
	tx, cur, err := lockVersion(ctx, lock)
	if err != nil {
		return v, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if cur != v {
		return cur, nil
	}
	if err := keepAlive(ctx, tx, func(ctx context.Context) error {
		// A statement here is this release's: it declares the schema
		// it writes, as the writers do.
		if _, err := r.conn.Exec(ctx, "SELECT set_config('"+WriterSetting+"', $1, false)", strconv.Itoa(int(Latest()))); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
		for _, stmt := range splitStatements(sql) {
			if _, err := r.conn.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
		}
		_, err := r.conn.Exec(ctx, "RESET ALL")
		return err
	}); err != nil {
		return v, err
	}
	return finish(ctx, tx, v, to, name, after)
}

// finish ends a step in tx, which holds the version row: after (when set),
// the version moved from v to to, the commit; it returns the version the
// database is at.
func finish(ctx context.Context, tx pgx.Tx, v, to int32, name string, after func(pgx.Tx) error) (int32, error) {
	if after != nil {
		if err := after(tx); err != nil {
			return v, err
		}
	}
	if err := setVersion(ctx, tx, to); err != nil {
		return v, err
	}
	if err := tx.Commit(ctx); err != nil {
		return v, fmt.Errorf("committing migration %s: %w", name, err)
	}
	return to, nil
}

// keepAlive runs f while it beats tx's session every heartbeat, so that
// the server's idle limit ends the session only when its client is gone.
//
// f's context ends if a beat fails: the lock may be gone (the server ended
// the session), and no statement of the step runs without it.
func keepAlive(ctx context.Context, tx pgx.Tx, f func(context.Context) error) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, beaten := make(chan struct{}), make(chan error, 1)
	go func() {
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				beaten <- nil
				return
			case <-t.C:
				if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
					cancel()
					beaten <- fmt.Errorf("keeping the schema version locked: %w", err)
					return
				}
			}
		}
	}()
	err := f(fctx)
	close(stop)
	return errors.Join(err, <-beaten)
}

// lockVersion begins a bounded transaction on conn holding the version
// row (FOR UPDATE), asking with NOWAIT until it is free, and returns the
// version; the transaction declares the schema this binary writes. A row
// lock needs UPDATE on the table, which only the migrations' owner has, and
// a role without it cannot get in its way either: the most a session can
// take of a table it may not write is ROW EXCLUSIVE (a write it prepares
// but may not run is locked at parse time), and a row lock's table lock,
// ROW SHARE, conflicts only with EXCLUSIVE and ACCESS EXCLUSIVE. The
// statements go by the simple protocol, which leaves no portal open: an
// open portal's snapshot would pin the transaction's xmin, and CREATE
// INDEX CONCURRENTLY, run by the migrator's other session meanwhile, waits
// for every transaction with an older xmin.
func lockVersion(ctx context.Context, conn *pgx.Conn) (pgx.Tx, int32, error) {
	for {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("beginning a migration: %w", err)
		}
		var v int32
		_, err = tx.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = '"+idleLimit+"'; SET LOCAL "+
			pgx.Identifier(strings.Split(WriterSetting, ".")).Sanitize()+" = '"+strconv.Itoa(int(Latest()))+"'")
		if err == nil {
			err = tx.QueryRow(ctx, "SELECT version FROM "+VersionTable+" FOR UPDATE NOWAIT", pgx.QueryExecModeSimpleProtocol).Scan(&v)
		}
		if err == nil {
			return tx, v, nil
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if !lockNotAvailable(err) {
			return nil, 0, fmt.Errorf("locking the schema version: %w", err)
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, 0, err
		}
	}
}

// setVersion records version as the schema's, after the migration's own
// settings are undone (RESET ALL, as tern does).
func setVersion(ctx context.Context, tx pgx.Tx, version int32) error {
	if _, err := tx.Exec(ctx, "RESET ALL"); err != nil {
		return fmt.Errorf("resetting the migration's settings: %w", err)
	}
	if _, err := tx.Exec(ctx, "UPDATE "+VersionTable+" SET version = $1", version); err != nil {
		return fmt.Errorf("recording schema version %d: %w", version, err)
	}
	return nil
}

// ensureVersionTable creates the version table at version 0 if it is not
// there (what tern does on its first run). Two migrators of an empty
// database may both create it: the loser's statement fails, and it finds
// the winner's table on its next try.
func ensureVersionTable(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('"+VersionTable+"') IS NOT NULL AND EXISTS (SELECT FROM "+VersionTable+")").Scan(&exists); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
			return fmt.Errorf("looking for the schema version table: %w", err)
		}
	}
	if exists {
		return nil
	}
	var err error
	for range 3 {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+VersionTable+" (version int4 NOT NULL)"); err != nil {
				return err
			}
			// SHARE ROW EXCLUSIVE conflicts with itself, so two first
			// migrators insert one row; a reader's ACCESS SHARE is no
			// obstacle.
			if _, err := tx.Exec(ctx, "LOCK TABLE "+VersionTable+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+VersionTable+" (version) SELECT 0 WHERE NOT EXISTS (SELECT FROM "+VersionTable+")")
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P07" && pgErr.Code != "42710") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("creating the schema version table: %w", err)
	}
	return nil
}

// queueBehindOlderMigrators waits while a migrator of an older release (or
// any session of a role that may migrate) holds LockKey, and takes it when
// it is free, so that older migrators wait for this one; it passes by a
// holder whose role may not write the schema version (no migrator: it
// could otherwise stop every migration). It returns what releases the key.
func queueBehindOlderMigrators(ctx context.Context, conn *pgx.Conn) (release func(context.Context) error, err error) {
	for {
		var state string
		err := conn.QueryRow(ctx, `SELECT CASE WHEN pg_try_advisory_lock($1::bigint) THEN 'held'
			WHEN EXISTS (
				SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
				  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				  AND l.classid = (($1 >> 32) & 4294967295)::oid AND l.objid = ($1 & 4294967295)::oid
				  AND EXISTS (SELECT 1 FROM pg_roles r WHERE pg_has_role(a.usesysid, r.oid, 'MEMBER')
				              AND has_table_privilege(r.oid, '`+VersionTable+`', 'UPDATE')))
			THEN 'wait' ELSE 'passed' END`, int64(LockKey)).Scan(&state)
		switch {
		case err != nil:
			return nil, fmt.Errorf("taking the migration lock: %w", err)
		case state == "held":
			return func(ctx context.Context) error {
				if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(LockKey)); err != nil {
					return fmt.Errorf("releasing the migration lock: %w", err)
				}
				return nil
			}, nil
		case state == "passed":
			return func(context.Context) error { return nil }, nil
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, fmt.Errorf("waiting for another migrator: %w", err)
		}
	}
}

// lockNotAvailable says err is a lock NOWAIT did not get (55P03).
func lockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
