package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtopo"
)

// holdParseLock begins a transaction on c and prepares sql in it, without
// running it: Postgres opens (and locks) the statement's tables while it
// parses it, and checks privileges only when it runs, so a role without
// any right on a table holds, until its transaction ends, the lock its
// statement would take there (ROW EXCLUSIVE for a write). The transaction
// is left open, as a session may leave it for as long as it lives.
func holdParseLock(ctx context.Context, t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	if _, err := c.Exec(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `PREPARE held AS `+sql); err != nil {
		t.Fatalf("PREPARE held AS %s: %v", sql, err)
	}
	var mode string
	if err := c.QueryRow(ctx, `SELECT string_agg(l.mode, ',') FROM pg_locks l
		WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.relation::regclass::text NOT LIKE 'pg_%'`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	t.Logf("a role that may not run %q holds %s by preparing it", sql, mode)
	t.Cleanup(func() { _, _ = c.Exec(context.Background(), `ROLLBACK`) })
}

// TestAPreparedWriteOfTheVersionTableStopsNoMigration: issue 38, "only a
// writer can stop a writer": what keeps migrators apart (EXCLUSIVE on the
// schema version table) must be out of reach of a role that may not write
// the version. A login role with no grants at all (PUBLIC keeps USAGE on
// schema public) that prepares an UPDATE of the version table in a
// transaction it leaves open holds ROW EXCLUSIVE there, which conflicts
// with EXCLUSIVE: every migrator's NOWAIT is refused, polled for ever. What
// should hold: the migration completes beside it.
func TestAPreparedWriteOfTheVersionTableStopsNoMigration(t *testing.T) {
	t.Parallel()
	ctx, admin := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, admin, migrations.Latest()-2); err != nil {
		t.Fatal(err)
	}
	stranger := roleConn(ctx, t, admin, "")
	holdParseLock(ctx, t, stranger, `UPDATE `+migrations.VersionTable+` SET version = 0`)
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := migrations.Apply(mctx, admin, migrations.Latest(), migrations.Options{Contract: migrations.ContractForce})
	if err != nil || res.To != migrations.Latest() {
		t.Fatalf("a migration beside a role with no grants holding a prepared write of the version table = %+v, %v; want it at version %d",
			res, err, migrations.Latest())
	}
}

// TestAPreparedWriteOfTheLedgerStopsNoContractStep: the same trick on the
// ledger. A login role with no grants prepares an INSERT into payments in a
// transaction it leaves open: ROW EXCLUSIVE on payments, which conflicts
// with the SHARE ROW EXCLUSIVE that contract step 26 (its LOCK TABLE, its
// CREATE TRIGGER) needs; the step waits out its lock_timeout, is tried
// again 20 times and fails. What should hold (issue 38: a role with no
// grants cannot block a migration): the contract step runs.
func TestAPreparedWriteOfTheLedgerStopsNoContractStep(t *testing.T) {
	t.Parallel()
	ctx, admin := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, admin, migrations.Latest()-1); err != nil {
		t.Fatal(err)
	}
	stranger := roleConn(ctx, t, admin, "")
	holdParseLock(ctx, t, stranger, `INSERT INTO payments DEFAULT VALUES`)
	mctx, cancel := context.WithTimeout(ctx, 50*time.Second)
	defer cancel()
	res, err := migrations.Apply(mctx, admin, migrations.Latest(), migrations.Options{Contract: migrations.ContractForce})
	if err != nil || res.To != migrations.Latest() {
		t.Fatalf("the contract step beside a role with no grants holding a prepared insert into payments = %+v, %v; want it at version %d",
			res, err, migrations.Latest())
	}
}

// TestAnOlderReplicaBehindPgBouncerKeepsTheContractPending: issue 39, "a
// contract step started while an old replica still lives waits". A
// replica reaching the database through PgBouncer in transaction mode
// (docs/operations/postgres.md) has no server session of its own:
// pg_stat_activity shows, on each server connection, the application_name
// of the last client that used it. Once a replica of this release has run
// one transaction on the connection an old replica used last (PgBouncer
// hands out the most recently freed one), the old replica, still connected
// and recording every poll, is not seen: OlderReplicas finds nothing and
// the contract step runs, refusing it. The previous release writes no
// replica_members row without GROUPS, so nothing else shows it. What
// should hold: while the old replica is connected, the contract step
// stays pending.
func TestAnOlderReplicaBehindPgBouncerKeepsTheContractPending(t *testing.T) {
	t.Parallel()
	srv := pgtopo.Standalone(t)
	bouncer := pgtopo.NewBouncer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	direct, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(context.Background())
	if _, err := migrations.MigrateTo(ctx, direct, migrations.Latest()-1); err != nil {
		t.Fatal(err)
	}
	client := func(app string) *pgx.Conn {
		c, err := pgx.Connect(ctx, bouncer.URL("postgres")+"&default_query_exec_mode=simple_protocol&application_name="+app)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	// The previous release's replica: a poll's transaction now and then,
	// which records the head as its head tracking does at every block.
	old := client("burnpoller")
	if _, err := old.Exec(ctx, `BEGIN; SELECT count(*) FROM block_cursors;
		INSERT INTO ledger_commits (head_chain_id, head_block, head_hash, events) VALUES (1337, 9, '0x`+strings.Repeat("ef", 32)+`', false);
		COMMIT`); err != nil {
		t.Fatal(err)
	}
	older, err := migrations.OlderReplicas(ctx, direct, migrations.Latest())
	if err != nil || len(older) == 0 {
		t.Fatalf("right after the old replica's transaction, OlderReplicas = %q, %v; want its session", older, err)
	}
	// A replica of this release polls once through the same pooler.
	fresh := client(migrations.SessionName("burnpoller"))
	if _, err := fresh.Exec(ctx, `BEGIN; SELECT count(*) FROM block_cursors; COMMIT`); err != nil {
		t.Fatal(err)
	}
	t.Logf("sessions: %q", texts(ctx, t, direct, `SELECT pid || ' ' || application_name || ' ' || coalesce(state, '') FROM pg_stat_activity WHERE datname = 'postgres'`))
	older, err = migrations.OlderReplicas(ctx, direct, migrations.Latest())
	if err != nil || len(older) == 0 {
		t.Errorf("with the old replica still connected through PgBouncer, OlderReplicas = %q, %v; want it seen", older, err)
	}
	res, err := migrations.Apply(ctx, direct, migrations.Latest(), migrations.Options{})
	if err != nil || res.Pending == nil || res.To != migrations.Latest()-1 {
		t.Errorf("poller migrate with the old replica connected through PgBouncer = %+v, %v; want the contract step pending", res, err)
	}
	// The old replica was there all along, and its next poll is refused.
	_, err = old.Exec(ctx, `BEGIN; UPDATE block_cursors SET polled_at = now(); COMMIT`)
	t.Logf("the old replica's next poll: %v", err)
}

// TestAnOlderReplicaReconnectingKeepsTheContractPending: issue 39, "the
// contract step runs only once no replica of an older release is alive".
// A replica of the previous release without GROUPS is seen only by its
// sessions, and only at the instant OlderReplicas looks: when Postgres
// ends its sessions (a restart, a failover, a pooler's reconnect, an
// operator's pg_terminate_backend) it is still alive and reconnects within
// its start-up back-off (up to 15 s), but a migrator looking in between
// (poller migrate --contract looks every 2 s; a replica of this release
// starting with MIGRATE=true looks once) finds nothing and runs the step,
// and the old replica's next poll is refused. The replica_members rows
// count for 30 s after their last beat (liveFor); sessions counted for no
// time at all. What should hold: a migration that looks for a while
// (poller migrate's Quiet) before it runs the step sees the old replica
// back, and keeps the step pending.
func TestAnOlderReplicaReconnectingKeepsTheContractPending(t *testing.T) {
	t.Parallel()
	ctx, admin := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, admin, migrations.Latest()-1); err != nil {
		t.Fatal(err)
	}
	oldURL := admin.Config().ConnString() + "&application_name=burnpoller"
	if !strings.Contains(admin.Config().ConnString(), "?") {
		oldURL = admin.Config().ConnString() + "?application_name=burnpoller"
	}
	old, err := pgx.Connect(ctx, oldURL)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := migrations.Apply(ctx, admin, migrations.Latest(), migrations.Options{}); err != nil || res.Pending == nil {
		t.Fatalf("beside the old replica's session = %+v, %v; want the contract step pending", res, err)
	}
	// The server ends the old replica's session; it reconnects a moment
	// later, as its pool does.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, old.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	_ = old.Close(ctx)
	waitFor(t, 10*time.Second, "the old session gone", func() bool {
		var n int
		_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'burnpoller'`).Scan(&n)
		return n == 0
	})
	// poller migrate looks for Quiet before it runs the step; the old
	// replica reconnects a second into it.
	reconnected := make(chan *pgx.Conn, 1)
	go func() {
		time.Sleep(time.Second)
		c, err := pgx.Connect(ctx, oldURL)
		if err != nil {
			t.Error(err)
		}
		reconnected <- c
	}()
	res, err := migrations.Apply(ctx, admin, migrations.Latest(), migrations.Options{Quiet: 5 * time.Second})
	again := <-reconnected
	if again == nil {
		t.FailNow()
	}
	defer again.Close(context.Background())
	if err != nil || res.Pending == nil || res.To != migrations.Latest()-1 {
		t.Errorf("a moment after the old replica's session ended = %+v, %v; want the contract step pending", res, err)
	}
	_, err = again.Exec(ctx, `UPDATE block_cursors SET polled_at = now()`)
	t.Logf("the old replica's first poll after reconnecting: %v", err)
}

// TestALaterMigrationMayRewriteTheLedger: docs/schema.md lets an expand
// step rewrite a large table "in batches, resumably (as migration 5
// did)". After contract step 26, the guard refuses every write of the
// ledger by a session named 'burnpoller…' that does not declare schema 26
// or later (SET LOCAL burnpoller.writer_schema), and the migrator's own
// session is one: `poller migrate` names it migrations.SessionName
// ("burnpoller"), a replica's start-up migration 'burnpoller-session/…',
// and the runner declares nothing. So the next release's first migration
// that touches payments, block_cursors, pending_payments,
// payment_events_staged, ledger_commits or rejected_logs fails in
// production with "this burnpoller release is retired", while every test
// passes: pgtest's template migrates under 'pgtest owner …' and tern's
// runner under no name. What should hold: a migration run by this
// release's runner on its own session may write the ledger.
func TestALaterMigrationMayRewriteTheLedger(t *testing.T) {
	t.Parallel()
	ctx, plain := emptyDatabase(t)
	cfg := plain.Config()
	cfg.RuntimeParams["application_name"] = migrations.SessionName("burnpoller") // as poller migrate opens it
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := migrations.MigrateTo(ctx, conn, migrations.Latest()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sql string }{
		{"in a transaction", `UPDATE payments SET orphaned_at = orphaned_at WHERE id BETWEEN 1 AND 1000;`},
		{"in batches, outside a transaction", "---- tern: disable-tx ----\nUPDATE payments SET orphaned_at = orphaned_at WHERE id BETWEEN 1 AND 1000;\nUPDATE payments SET orphaned_at = orphaned_at WHERE id BETWEEN 1001 AND 2000;"},
	} {
		if err := migrations.RunStep(ctx, conn, migrations.Latest(), "027_rewrite_payments.sql", tc.sql); err != nil {
			t.Errorf("a later migration rewriting payments %s, run by poller migrate's session = %v; want it to run", tc.name, err)
		}
	}
}
