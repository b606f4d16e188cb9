package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConcurrentMigratorsAgree(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := check(ctx, t, dbURL); !errors.Is(err, migrations.ErrPending) {
		t.Fatalf("Check on an empty database = %v, want ErrPending", err)
	}
	// Replicas starting at once all migrate; the advisory lock serialises them.
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			_, errs[i] = migrations.Migrate(ctx, conn)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	if err := check(ctx, t, dbURL); err != nil {
		t.Fatalf("Check after migrating = %v", err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('payments', 'block_cursors')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 2 {
		t.Fatalf("%d ledger tables, want 2", tables)
	}
}

// TestANewerSchemaIsRefusedOnceItRetiresThisRelease: a database a later
// release migrated further is one this binary runs against (the later
// release only added to it), and migrates no further, until a contract
// step beyond this binary's schema retires it: then Check and Migrate
// refuse it, naming the release to roll to.
func TestANewerSchemaIsRefusedOnceItRetiresThisRelease(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	next := migrations.Latest() + 1
	if _, err := conn.Exec(ctx, "UPDATE "+migrations.VersionTable+" SET version = $1", next); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, conn); err != nil {
		t.Fatalf("Check of a schema a later release expanded = %v, want nil", err)
	}
	if from, err := migrations.Migrate(ctx, conn); err != nil || from != next {
		t.Fatalf("Migrate of a schema a later release expanded = %d, %v; want %d, nil", from, err, next)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_contracts (version, name, release, forced) VALUES ($1, 'next_contract.sql', 'v9.9.9 (revision abc)', false)`, next); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"Check": migrations.Check(ctx, conn), "Migrate": func() error { _, err := migrations.Migrate(ctx, conn); return err }()} {
		if !errors.Is(err, migrations.ErrTooNew) || !strings.Contains(err.Error(), "roll to burnpoller v9.9.9 (revision abc)") {
			t.Errorf("%s of a schema whose contract step retired this release = %v, want ErrTooNew naming the release to roll to", name, err)
		}
	}
}

func check(ctx context.Context, t *testing.T, dbURL string) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	return migrations.Check(ctx, conn)
}

// TestKeyMigrationOnAPopulatedLedger: the unique key widens to
// (chain_id, tx_hash, log_index) on a ledger that already has rows, keeping
// every row, and inserts stay idempotent on the new key.
func TestKeyMigrationOnAPopulatedLedger(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 3); err != nil {
		t.Fatal(err)
	}
	// 10,000 payments and a rejected log under the old key.
	if _, err := conn.Exec(ctx, `
		INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		SELECT 1, '0x'||repeat('ab', 20), '0x'||lpad(to_hex(i), 64, '0'), i % 3, i, '0x'||repeat('cd', 32),
		       '0x'||repeat('12', 20), '0x'||repeat('34', 32), i, now()
		FROM generate_series(1, 10000) AS i;
		INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('0', 64), 0, 1, '0x'||repeat('cd', 32), '{}', 'x');`); err != nil {
		t.Fatal(err)
	}
	migrateTwiceKeepingTheLedger(ctx, t, conn, 5, 3)
	for table, want := range map[string]string{
		"rejected_logs": "UNIQUE (chain_id, tx_hash, log_index)",
	} {
		defs := texts(ctx, t, conn, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'u'`, table)
		if len(defs) != 1 || defs[0] != want {
			t.Fatalf("%s unique constraints = %v, want only %s", table, defs, want)
		}
	}
	// payments: no unique constraint, one unique index over the live rows.
	uniques := texts(ctx, t, conn, `SELECT indexdef FROM pg_indexes WHERE tablename = 'payments' AND indexdef LIKE 'CREATE UNIQUE%'`)
	var constraints int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conrelid = 'payments'::regclass AND contype = 'u'`).Scan(&constraints); err != nil {
		t.Fatal(err)
	}
	if constraints != 0 || len(uniques) != 2 || !strings.Contains(strings.Join(uniques, "\n"), "payments_live_key ON public.payments USING btree (tx_hash, log_index, chain_id) WHERE (orphaned_at IS NULL)") {
		t.Fatalf("payments: %d unique constraints, unique indexes %v; want only the primary key and payments_live_key over the live rows", constraints, uniques)
	}
	var blockIndex string
	if err := conn.QueryRow(ctx, `SELECT string_agg(indexdef, '; ') FROM pg_indexes WHERE tablename = 'payments' AND indexdef LIKE '%block_number%'`).Scan(&blockIndex); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(blockIndex, "(chain_id, block_number)") || strings.Contains(blockIndex, "USING btree (block_number)") {
		t.Fatalf("block indexes = %s, want (chain_id, block_number) only", blockIndex)
	}
	var invalid int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`).Scan(&invalid); err != nil {
		t.Fatal(err)
	}
	if invalid != 0 {
		t.Fatalf("%d invalid indexes left behind", invalid)
	}
	// The same key on another chain is another payment; on the same chain, a duplicate.
	tag, err := conn.Exec(ctx, `
		INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		SELECT c, '0x'||repeat('ab', 20), '0x'||lpad(to_hex(1), 64, '0'), 1, 1, '0x'||repeat('cd', 32),
		       '0x'||repeat('12', 20), '0x'||repeat('34', 32), 1, now()
		FROM unnest(ARRAY[1, 2]) AS c
		ON CONFLICT (chain_id, tx_hash, log_index) WHERE orphaned_at IS NULL DO NOTHING`)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("%d rows inserted, want 1 (chain 2's)", tag.RowsAffected())
	}
}

// TestContractKeyMigrationOnAPopulatedLedger: migration 17 puts the
// contract in the keys of payments, pending_payments and rejected_logs on a
// ledger that has rows, keeping every row; a run stopped half-way runs
// again to the same schema; two contracts' burns under one (chain, tx, log
// index) are then two rows; and a writer of the previous release, still
// running, fails its insert (its ON CONFLICT names the old key) instead of
// writing anything.
func TestContractKeyMigrationOnAPopulatedLedger(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 16); err != nil {
		t.Fatal(err)
	}
	const row = `chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at`
	if _, err := conn.Exec(ctx, `
		INSERT INTO payments (`+row+`)
		SELECT 1, '0x'||repeat('ab', 20), '0x'||lpad(to_hex(i), 64, '0'), i % 3, i, '0x'||repeat('cd', 32),
		       '0x'||repeat('12', 20), '0x'||repeat('34', 32), i, now()
		FROM generate_series(1, 10000) AS i;
		INSERT INTO pending_payments (`+row+`)
		VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('0', 64), 7, 20001, '0x'||repeat('cd', 32),
		        '0x'||repeat('12', 20), '0x'||repeat('34', 32), 5, now());
		INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('0', 64), 7, 1, '0x'||repeat('cd', 32), '{}', 'x');`); err != nil {
		t.Fatal(err)
	}
	migrateTwiceKeepingTheLedger(ctx, t, conn, 17, 16)
	uniques := texts(ctx, t, conn, `SELECT indexdef FROM pg_indexes WHERE tablename IN ('payments', 'pending_payments', 'rejected_logs')
		AND indexdef LIKE 'CREATE UNIQUE%' AND indexname NOT IN ('payments_pkey', 'rejected_logs_pkey') ORDER BY indexname`)
	want := []string{
		"CREATE UNIQUE INDEX payments_live_key ON public.payments USING btree (tx_hash, log_index, chain_id, contract) WHERE (orphaned_at IS NULL)",
		"CREATE UNIQUE INDEX pending_payments_pkey ON public.pending_payments USING btree (tx_hash, log_index, chain_id, contract)",
		"CREATE UNIQUE INDEX rejected_logs_chain_id_contract_tx_hash_log_index_key ON public.rejected_logs USING btree (chain_id, contract, tx_hash, log_index)",
	}
	if !slices.Equal(uniques, want) {
		t.Fatalf("unique indexes:\n%s\nwant:\n%s", strings.Join(uniques, "\n"), strings.Join(want, "\n"))
	}
	var invalid int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`).Scan(&invalid); err != nil {
		t.Fatal(err)
	}
	if invalid != 0 {
		t.Fatalf("%d invalid indexes left behind", invalid)
	}
	// Another contract's burn under the same chain, transaction and log
	// index is a row of its own in each table; the same contract's, a
	// duplicate.
	for _, stmt := range []string{
		`INSERT INTO payments (` + row + `)
		 SELECT 1, c, '0x'||lpad(to_hex(1), 64, '0'), 1, 1, '0x'||repeat('cd', 32), '0x'||repeat('12', 20), '0x'||repeat('34', 32), 1, now()
		 FROM unnest(ARRAY['0x'||repeat('ab', 20), '0x'||repeat('ef', 20)]) AS c
		 ON CONFLICT (chain_id, contract, tx_hash, log_index) WHERE orphaned_at IS NULL DO NOTHING`,
		`INSERT INTO pending_payments (` + row + `)
		 SELECT 1, c, '0x'||repeat('0', 64), 7, 20001, '0x'||repeat('cd', 32), '0x'||repeat('12', 20), '0x'||repeat('34', 32), 5, now()
		 FROM unnest(ARRAY['0x'||repeat('ab', 20), '0x'||repeat('ef', 20)]) AS c
		 ON CONFLICT (tx_hash, log_index, chain_id, contract) DO NOTHING`,
		`INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		 SELECT 1, c, '0x'||repeat('0', 64), 7, 1, '0x'||repeat('cd', 32), '{}', 'x'
		 FROM unnest(ARRAY['0x'||repeat('ab', 20), '0x'||repeat('ef', 20)]) AS c
		 ON CONFLICT (chain_id, contract, tx_hash, log_index) DO NOTHING`,
	} {
		tag, err := conn.Exec(ctx, stmt)
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() != 1 {
			t.Fatalf("%d rows inserted by %s; want 1 (the other contract's)", tag.RowsAffected(), stmt)
		}
	}
	// The previous release's inserts name the old keys: they fail, and
	// write nothing.
	for _, stmt := range []string{
		`INSERT INTO payments (` + row + `)
		 VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('99', 32), 1, 1, '0x'||repeat('cd', 32), '0x'||repeat('12', 20), '0x'||repeat('34', 32), 1, now())
		 ON CONFLICT (chain_id, tx_hash, log_index) WHERE orphaned_at IS NULL DO NOTHING`,
		`INSERT INTO pending_payments (` + row + `)
		 VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('99', 32), 1, 1, '0x'||repeat('cd', 32), '0x'||repeat('12', 20), '0x'||repeat('34', 32), 1, now())
		 ON CONFLICT (tx_hash, log_index, chain_id) DO NOTHING`,
		`INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		 VALUES (1, '0x'||repeat('ab', 20), '0x'||repeat('99', 32), 1, 1, '0x'||repeat('cd', 32), '{}', 'x')
		 ON CONFLICT (chain_id, tx_hash, log_index) DO NOTHING`,
	} {
		var pgErr *pgconn.PgError
		if _, err := conn.Exec(ctx, stmt); !errors.As(err, &pgErr) || pgErr.Code != "42P10" {
			t.Fatalf("the previous release's %s = %v, want it refused (42P10)", stmt, err)
		}
	}
	// payment_status tells the two contracts' burns apart.
	status := texts(ctx, t, conn, `SELECT status || ' ' || contract FROM payment_status WHERE tx_hash = '0x'||repeat('0', 64) ORDER BY 1`)
	if !slices.Equal(status, []string{"seen 0x" + strings.Repeat("ab", 20), "seen 0x" + strings.Repeat("ef", 20)}) {
		t.Fatalf("payment_status = %v", status)
	}
}

// TestHistoryMigrationRunsAgain: migration 18 runs statement by statement
// on a live ledger; a run that stopped after its statements but before
// recording the version runs them all again, and the events committed in
// between and after are numbered with their history.
func TestHistoryMigrationRunsAgain(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 18); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE "+migrations.VersionTable+" SET version = 17"); err != nil {
		t.Fatal(err)
	}
	if from, err := migrations.MigrateTo(ctx, conn, 18); err != nil || from != 17 {
		t.Fatalf("Migrate again = %d, %v", from, err)
	}
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT convalidated FROM pg_constraint WHERE conname = 'payment_events_history_hash_check'`).Scan(&valid); err != nil || !valid {
		t.Fatalf("history_hash's check validated = %v, %v", valid, err)
	}
	indexes := texts(ctx, t, conn, `SELECT indexname FROM pg_indexes WHERE indexname LIKE '%xact%' ORDER BY 1`)
	if !slices.Equal(indexes, []string{"ledger_commits_xact_idx", "payment_events_staged_xact_idx"}) {
		t.Fatalf("xact indexes %v", indexes)
	}
	if _, err := conn.Exec(ctx, `BEGIN;
		INSERT INTO ledger_commits (events) VALUES (true);
		INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		VALUES (1, 'e1', 'seen', 1, 'c', 't', 0, 1, 'h', 'p', 'd', 1, now());
		COMMIT`); err != nil {
		t.Fatal(err)
	}
	var history string
	if err := conn.QueryRow(ctx, `SELECT encode(history_hash, 'hex') FROM payment_events WHERE seq = 1`).Scan(&history); err != nil ||
		history != "e49cae41a83f04a326ed0b6516adbd9ce3b2dac53c639ff9dfafb15d582f143e" {
		t.Fatalf("the first event's history %s (%v), want sha256 of \"e1\\n\"", history, err)
	}
}

// emptyDatabase connects to a new, unmigrated database, closed when t ends.
func emptyDatabase(t *testing.T) (context.Context, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ctx, conn
}

// texts runs a query of one text column and returns its rows.
func texts(ctx context.Context, t *testing.T, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHexChecksAcceptWhatTheyDid: migration 14 rewrites every check on a
// hex column (hashes, addresses, digests) in a cheaper form. For every such
// check and a set of values around its edges, the new check accepts exactly
// what the old one did; it migrates a populated ledger, leaves every check
// validated, and migrating down brings the old checks back.
func TestHexChecksAcceptWhatTheyDid(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 13); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		SELECT 1, '0x'||repeat('ab', 20), '0x'||lpad(to_hex(i), 64, '0'), 0, i, '0x'||repeat('cd', 32),
		       '0x'||repeat('12', 20), '0x'||repeat('34', 32), i, now()
		FROM generate_series(1, 1000) AS i`); err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, n := range []int{40, 64} {
		hex := strings.Repeat("0123456789abcdef", 4)[:n]
		values = append(values,
			"0x"+hex, "0x"+hex[1:], "0x"+hex+"0", hex, "0X"+hex, "0x"+strings.ToUpper(hex),
			"0x"+hex[:n-1]+"g", "0x"+hex[:n-1]+"\n", "0x"+hex+"\n", " 0x"+hex[1:], "0x"+hex[:n-2]+"é",
			"0x"+strings.Repeat("0", n), strings.Repeat("0", n+2), "0x", "", "00"+hex)
	}
	before := acceptance(ctx, t, conn, values)
	if len(before) != 19 {
		t.Fatalf("version 13 has %d hex checks, want 19: %v", len(before), before)
	}
	if from, err := migrations.MigrateTo(ctx, conn, 14); err != nil || from != 13 {
		t.Fatalf("Migrate = %d, %v", from, err)
	}
	after := acceptance(ctx, t, conn, values)
	for name, want := range before {
		got, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s is gone", name)
		case got.def == want.def || strings.Contains(got.def, "{"):
			t.Errorf("%s was not rewritten: %s", name, got.def)
		case got.accepts != want.accepts:
			t.Errorf("%s accepts %q, the old check %q", name, got.accepts, want.accepts)
		}
	}
	invalid := texts(ctx, t, conn, `SELECT conname::text FROM pg_constraint WHERE NOT convalidated`)
	if len(invalid) != 0 {
		t.Fatalf("constraints left not validated: %v", invalid)
	}
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&rows); err != nil || rows != 1000 {
		t.Fatalf("payments after migrating: %d, %v; want 1000", rows, err)
	}
	if _, err := migrations.MigrateTo(ctx, conn, 13); err != nil {
		t.Fatal(err)
	}
	for name, got := range acceptance(ctx, t, conn, values) {
		if got.def != before[name].def {
			t.Errorf("down: %s is %s, want %s", name, got.def, before[name].def)
		}
	}
}

type hexCheck struct {
	def     string
	accepts string // one letter a value: y accepted, n refused
}

// acceptance evaluates every check whose definition holds a regular
// expression against each value in place of its column.
func acceptance(ctx context.Context, t *testing.T, conn *pgx.Conn, values []string) map[string]hexCheck {
	t.Helper()
	rows, err := conn.Query(ctx, `
		SELECT c.conname::text, pg_get_constraintdef(c.oid), a.attname::text
		FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
		WHERE c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%~%' AND cardinality(c.conkey) = 1`)
	if err != nil {
		t.Fatal(err)
	}
	type check struct{ name, def, column string }
	checks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (check, error) {
		var c check
		return c, r.Scan(&c.name, &c.def, &c.column)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]hexCheck{}
	for _, c := range checks {
		expr := strings.TrimPrefix(c.def, "CHECK ")
		var accepts strings.Builder
		for _, v := range values {
			var ok bool
			q := fmt.Sprintf(`SELECT coalesce(%s, true) FROM (SELECT $1::text AS %s) AS v`, expr, pgx.Identifier{c.column}.Sanitize())
			if err := conn.QueryRow(ctx, q, v).Scan(&ok); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if ok {
				accepts.WriteByte('y')
			} else {
				accepts.WriteByte('n')
			}
		}
		if !strings.Contains(accepts.String(), "y") || !strings.Contains(accepts.String(), "n") {
			t.Fatalf("%s accepts %q: the values do not reach both sides of it", c.name, accepts.String())
		}
		out[c.name] = hexCheck{def: c.def, accepts: accepts.String()}
	}
	return out
}

// TestEventNumberingMigratesDownAndUp: migration 16 replaces the commit
// trigger's function and migrating down brings migration 15's back, word
// for word; events staged under either are numbered.
func TestEventNumberingMigratesDownAndUp(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	body := func() string { t.Helper(); return functionSource(ctx, t, conn, "burnpoller_commit_ledger") }
	numbers := func(id string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `
			INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
			                                   block_hash, payer, digest, amount, burned_at)
			VALUES (1, $1, 'seen', 1337, '0x' || repeat('ab', 20), '0x' || repeat('01', 32), 0, 7,
			        '0x' || repeat('cd', 32), '0x' || repeat('12', 20), '0x' || repeat('34', 32), 5, now())`, id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_commits (events) VALUES (true)`); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM payment_events WHERE event_id = $1`, id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("event %s recorded %d times, %v", id, n, err)
		}
	}
	if _, err := migrations.MigrateTo(ctx, conn, 15); err != nil {
		t.Fatal(err)
	}
	v15 := body()
	numbers("at-15")
	if _, err := migrations.MigrateTo(ctx, conn, 16); err != nil {
		t.Fatal(err)
	}
	if v16 := body(); v16 == v15 || !strings.Contains(v16, "payment_events_event_id_key") {
		t.Fatal("migration 16 left the commit function as it was")
	}
	numbers("at-16")
	if _, err := migrations.MigrateTo(ctx, conn, 15); err != nil {
		t.Fatal(err)
	}
	if body() != v15 {
		t.Fatal("migrating down did not bring migration 15's function back")
	}
	numbers("down-at-15")
}

// migrateTwiceKeepingTheLedger migrates conn's database from version from
// to version to, then again as a run does that stopped after its
// statements but before recording the version (it runs them all again
// and ends in the same schema), and checks the ledger the tests seeded
// (10,000 payments of amounts 1 to 10,000) came through whole.
func migrateTwiceKeepingTheLedger(ctx context.Context, t *testing.T, conn *pgx.Conn, to, from int32) {
	t.Helper()
	if got, err := migrations.MigrateTo(ctx, conn, to); err != nil || got != from {
		t.Fatalf("Migrate = %d, %v; want from %d", got, err, from)
	}
	if _, err := conn.Exec(ctx, "UPDATE "+migrations.VersionTable+" SET version = $1", to-1); err != nil {
		t.Fatal(err)
	}
	if got, err := migrations.MigrateTo(ctx, conn, to); err != nil || got != to-1 {
		t.Fatalf("Migrate again = %d, %v; want from %d", got, err, to-1)
	}
	var rows int
	var sum string
	if err := conn.QueryRow(ctx, `SELECT count(*), sum(amount)::text FROM payments`).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if rows != 10000 || sum != "50005000" {
		t.Fatalf("after migrating: %d rows summing %s, want 10000 summing 50005000", rows, sum)
	}
}

// TestWritersGetThePaymentIDSequence: migration 22 grants USAGE on the
// payments' id sequence to every role that may insert payments (a writer
// set up without db/roles.sql, with table rights only), which then takes
// ids with nextval; a role that only reads gets nothing.
func TestWritersGetThePaymentIDSequence(t *testing.T) {
	t.Parallel()
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 21); err != nil {
		t.Fatal(err)
	}
	suffix := strings.ReplaceAll(fmt.Sprint(time.Now().UnixNano()), "-", "")
	writer, reader := "bp_writer_"+suffix, "bp_reader_"+suffix
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE ROLE %[1]s; CREATE ROLE %[2]s;
		GRANT SELECT, INSERT ON payments TO %[1]s; GRANT SELECT ON payments TO %[2]s`, writer, reader)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %[1]s, %[2]s; DROP ROLE %[1]s, %[2]s`, writer, reader))
	})
	usage := func(role string) bool {
		t.Helper()
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT has_sequence_privilege($1, pg_get_serial_sequence('payments', 'id'), 'USAGE')`,
			role).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if usage(writer) {
		t.Fatal("the writer has USAGE on the sequence before migration 22; the test proves nothing")
	}
	if _, err := migrations.MigrateTo(ctx, conn, 22); err != nil {
		t.Fatal(err)
	}
	if !usage(writer) || usage(reader) {
		t.Fatalf("after migration 22: writer USAGE %v, reader USAGE %v; want true, false", usage(writer), usage(reader))
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+writer); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := conn.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('payments', 'id'))`).Scan(&id); err != nil || id < 1 {
		t.Fatalf("nextval as the writer = %d, %v", id, err)
	}
	if _, err := conn.Exec(ctx, `RESET ROLE`); err != nil {
		t.Fatal(err)
	}
}

// TestMoveStagedNumbersAsBefore: migration 23 moves a commit's staged
// events into payment_events in three statements instead of one that
// materialized them. The same transactions, committed at version 22 and at
// version 23, leave exactly the same events: seqs by ord whatever order the
// rows were written in, the names of an id recorded already or staged twice
// in one transaction, and every history_hash. Migrating down brings
// migration 18's function back, which numbers as before.
func TestMoveStagedNumbersAsBefore(t *testing.T) {
	t.Parallel()
	// Each entry is one transaction: its events staged in the order given
	// (ords written out of order), then committed.
	stage := `INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
	                                   block_hash, payer, digest, amount, burned_at, payment_id)
		SELECT o, id, CASE WHEN pay IS NULL THEN 'seen' ELSE 'confirmed' END, 1337, '0x' || repeat('ab', 20),
		       '0x' || lpad(to_hex(o), 64, '0'), o::int, 7, '0x' || repeat('cd', 32), '0x' || repeat('12', 20),
		       '0x' || repeat('34', 32), o * 1000000007, '2026-01-01T00:00:00Z', pay
		FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS s(o, id, pay)`
	type staged struct {
		ords []int64
		ids  []string
		pays []*int64
	}
	pay := func(n int64) *int64 { return &n }
	txs := []staged{
		{[]int64{3, 1, 2, 5, 4}, []string{"c", "a", "b", "e", "d"}, []*int64{pay(3), nil, pay(2), nil, pay(4)}},
		// "a" is recorded already, "f" is staged twice: the general path names them.
		{[]int64{2, 1, 3}, []string{"f", "a", "f"}, []*int64{nil, nil, pay(9)}},
	}
	var many staged
	for o := int64(2500); o >= 1; o-- {
		many.ords = append(many.ords, o)
		many.ids = append(many.ids, fmt.Sprintf("many-%d", o))
		many.pays = append(many.pays, pay(100+o))
	}
	txs = append(txs, many, staged{[]int64{1}, []string{"last"}, []*int64{nil}})
	run := func(version int32) []string {
		t.Helper()
		ctx, conn := emptyDatabase(t)
		if _, err := migrations.MigrateTo(ctx, conn, version); err != nil {
			t.Fatal(err)
		}
		for _, s := range txs {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, stage, s.ords, s.ids, s.pays); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ledger_commits (events) VALUES (true)`); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("version %d: %v", version, err)
			}
		}
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM payment_events_staged`).Scan(&left); err != nil || left != 0 {
			t.Fatalf("version %d: %d staged rows left, %v", version, left, err)
		}
		return texts(ctx, t, conn, `SELECT concat_ws(' ', seq, event_id, kind, tx_hash, log_index, amount, payment_id,
			encode(history_hash, 'hex')) FROM payment_events ORDER BY seq`)
	}
	before, after := run(22), run(23)
	if len(before) != 2509 || !slices.Equal(before, after) {
		t.Fatalf("version 22 numbered %d events, version 23 %d; first difference at %d",
			len(before), len(after), firstDifference(before, after))
	}
	// The ords, not the order written, set the seqs; the names of repeats
	// are migration 15's.
	for i, want := range []string{"1 a seen", "2 b confirmed", "3 c confirmed", "4 d confirmed", "5 e seen",
		"6 a:2 seen", "7 f seen", "8 f:2 confirmed", "9 many-1 confirmed", "2508 many-2500 confirmed", "2509 last seen"} {
		at := i
		if i >= 9 {
			at = 2498 + i // the last two
		}
		if !strings.HasPrefix(after[at], want+" ") {
			t.Fatalf("event %d is %q, want %q…", at+1, after[at], want)
		}
	}

	// Down to 22: migration 18's function again, numbering as before.
	ctx, conn := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, conn, 22); err != nil {
		t.Fatal(err)
	}
	src := func() string { t.Helper(); return functionSource(ctx, t, conn, "burnpoller_move_staged") }
	v22 := src()
	if _, err := migrations.MigrateTo(ctx, conn, 23); err != nil {
		t.Fatal(err)
	}
	if src() == v22 {
		t.Fatal("migration 23 left the move as it was")
	}
	if _, err := migrations.MigrateTo(ctx, conn, 22); err != nil {
		t.Fatal(err)
	}
	if src() != v22 {
		t.Fatal("migrating down did not bring migration 18's move back")
	}
}

// functionSource is the body of the function named name (there must be
// one).
func functionSource(ctx context.Context, t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	src := texts(ctx, t, conn, `SELECT prosrc FROM pg_proc WHERE proname = $1`, name)
	if len(src) != 1 {
		t.Fatalf("%d functions named %s, want 1", len(src), name)
	}
	return src[0]
}

// firstDifference is the first index at which a and b differ.
func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
