package migrations_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"

	"github.com/burnpoller/burnpoller/db/migrations"
)

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		give string
		want []string
	}{
		{name: "statements", give: "SELECT 1;\nSELECT 2;", want: []string{"SELECT 1;", "SELECT 2;"}},
		{name: "no final semicolon", give: "SELECT 1; SELECT 2", want: []string{"SELECT 1;", "SELECT 2"}},
		{name: "comments alone are dropped", give: "-- a; b\n/* c; */ SELECT 1; -- d\n", want: []string{"-- a; b\n/* c; */ SELECT 1;"}},
		{name: "semicolon in a string", give: "SELECT 'a;b'';c'; SELECT 2;", want: []string{"SELECT 'a;b'';c';", "SELECT 2;"}},
		{name: "escape string", give: `SELECT E'a\';b'; SELECT 2;`, want: []string{`SELECT E'a\';b';`, "SELECT 2;"}},
		{name: "not an escape string", give: `SELECT fee'\'; SELECT 2;`, want: []string{`SELECT fee'\';`, "SELECT 2;"}},
		{name: "quoted identifier", give: `SELECT 1 AS "a;""b"; SELECT 2;`, want: []string{`SELECT 1 AS "a;""b";`, "SELECT 2;"}},
		{name: "dollar quotes", give: "DO $$ BEGIN PERFORM 1; END $$; SELECT 2;", want: []string{"DO $$ BEGIN PERFORM 1; END $$;", "SELECT 2;"}},
		{name: "tagged dollar quotes", give: "DO $f$ BEGIN RAISE '$$;'; END $f$; SELECT 2;", want: []string{"DO $f$ BEGIN RAISE '$$;'; END $f$;", "SELECT 2;"}},
		{name: "parameter and identifier dollars", give: "PREPARE p AS SELECT $1; SELECT a$b FROM t;", want: []string{"PREPARE p AS SELECT $1;", "SELECT a$b FROM t;"}},
		{name: "nested block comment", give: "/* a /* b; */ c; */ SELECT 1; SELECT 2;", want: []string{"/* a /* b; */ c; */ SELECT 1;", "SELECT 2;"}},
		{name: "unterminated string runs to the end", give: "SELECT 'a; SELECT 2;", want: []string{"SELECT 'a; SELECT 2;"}},
		{name: "empty", give: " \n", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := migrations.SplitStatements(tc.give); !slices.Equal(got, tc.want) {
				t.Fatalf("SplitStatements(%q) = %q, want %q", tc.give, got, tc.want)
			}
		})
	}
}

// schemaOf describes everything the migrations create, in a form two
// databases can be compared by: relations and their columns, constraints,
// indexes, functions, triggers, views, privileges and comments, and the
// schema version.
func schemaOf(ctx context.Context, t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	return texts(ctx, t, conn, `
		SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' ' || coalesce(obj_description(c.oid), '')
		FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'col ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
		       || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || coalesce(a.attacl::text, '')
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT 'con ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) || ' ' || convalidated
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'idx ' || pg_get_indexdef(indexrelid) || ' ' || indisvalid FROM pg_index
		WHERE indrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)
		UNION ALL
		SELECT 'fn ' || pg_get_functiondef(oid) || ' ' || coalesce(proacl::text, '') FROM pg_proc WHERE pronamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'trg ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
		UNION ALL
		SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid) FROM pg_class c
		WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('v', 'm')
		UNION ALL
		SELECT 'version ' || version FROM `+migrations.VersionTable+`
		ORDER BY 1`)
}

// TestStepsBuildWhatTernBuilds: the migrations applied step by step build
// the schema tern's own runner builds from the same files, every object,
// privilege and comment of it.
func TestStepsBuildWhatTernBuilds(t *testing.T) {
	t.Parallel()
	ctx, ours := emptyDatabase(t)
	_, terns := emptyDatabase(t)
	if _, err := migrations.Migrate(ctx, ours); err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewMigrator(ctx, terns, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.Files); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, migrations.Latest()); err != nil {
		t.Fatal(err)
	}
	got, want := schemaOf(ctx, t, ours), schemaOf(ctx, t, terns)
	if len(want) < 200 {
		t.Fatalf("tern's schema has %d lines: the description misses it", len(want))
	}
	if !slices.Equal(got, want) {
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Errorf("only ours: %s", l)
			}
		}
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("only tern's: %s", l)
			}
		}
	}
	// And back down, step by step, as far as the migrations undo (003
	// cannot be undone), as tern goes down.
	if _, err := migrations.MigrateTo(ctx, ours, 3); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got, want := schemaOf(ctx, t, ours), schemaOf(ctx, t, terns); !slices.Equal(got, want) {
		t.Fatalf("at version 3: ours\n%s\ntern's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoOtherRoleStopsAMigration: whatever a role without the right to
// write the schema version holds (the previous release's migration lock,
// tern's, a transaction reading the version), a migration goes on; a
// migrator of the previous release, holding its lock, is waited for.
func TestNoOtherRoleStopsAMigration(t *testing.T) {
	t.Parallel()
	ctx, admin := emptyDatabase(t)
	if _, err := migrations.MigrateTo(ctx, admin, migrations.Latest()-1); err != nil {
		t.Fatal(err)
	}
	reader := roleConn(ctx, t, admin, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s")
	stranger := roleConn(ctx, t, admin, "")
	const ternLock = 9628173550095224 // tern's own migration lock
	for _, c := range []*pgx.Conn{reader, stranger} {
		for _, sql := range []string{
			`LOCK TABLE ` + migrations.VersionTable + ` IN EXCLUSIVE MODE`,
			`LOCK TABLE ` + migrations.VersionTable + ` IN ROW SHARE MODE`,
			`SELECT version FROM ` + migrations.VersionTable + ` FOR UPDATE`,
		} {
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("%s = %v, want permission denied (42501)", sql, err)
			}
		}
	}
	for _, c := range []*pgx.Conn{reader, stranger} {
		// Session-level, outside any transaction: no server bound ends
		// them; the reader also reads the version in a transaction left
		// open.
		for _, sql := range []string{
			`SELECT pg_advisory_lock(` + itoa(migrations.LockKey) + `), pg_advisory_lock(` + itoa(ternLock) + `)`,
			`BEGIN`,
			`SELECT version FROM ` + migrations.VersionTable,
		} {
			if _, err := c.Exec(ctx, sql); err != nil && c == reader {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		from, err := migrations.Migrate(mctx, admin)
		cancel()
		if err != nil || from != migrations.Latest()-1 {
			t.Fatalf("Migrate beside another role's locks = %d, %v; want from %d", from, err, migrations.Latest()-1)
		}
		if err := migrations.Check(ctx, admin); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `ROLLBACK; SELECT pg_advisory_unlock_all()`); err != nil {
			t.Fatal(err)
		}
		if _, err := migrations.MigrateTo(ctx, admin, migrations.Latest()-1); err != nil {
			t.Fatal(err)
		}
	}

	// A migrator of the previous release holds its lock: this one waits
	// for it, and goes on once it is released.
	older, err := pgx.Connect(ctx, admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close(ctx)
	if _, err := older.Exec(ctx, `SELECT pg_advisory_lock(`+itoa(migrations.LockKey)+`)`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := migrations.Migrate(ctx, admin); done <- err }()
	waitFor(t, 10*time.Second, "the migrator asking for the previous release's lock", func() bool {
		var n int
		_ = older.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'`).Scan(&n)
		return n > 0
	})
	select {
	case err := <-done:
		t.Fatalf("Migrate beside a migrator of the previous release returned %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if v, err := migrations.Current(ctx, older); err != nil || v != migrations.Latest()-1 {
		t.Fatalf("schema at %d (%v) while the older migrator holds its lock", v, err)
	}
	if _, err := older.Exec(ctx, `SELECT pg_advisory_unlock(`+itoa(migrations.LockKey)+`)`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, older); err != nil {
		t.Fatal(err)
	}
}

// roleConn creates a login role for this test (roles are cluster-wide),
// runs grant for it (%s is its name; "" grants nothing) and connects as it.
func roleConn(ctx context.Context, t *testing.T, admin *pgx.Conn, grant string) *pgx.Conn {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "bprole_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, `CREATE ROLE `+name+` LOGIN PASSWORD 'role-pw'`); err != nil {
		t.Fatal(err)
	}
	if grant != "" {
		if _, err := admin.Exec(ctx, strings.ReplaceAll(grant, "%s", name)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(admin.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, "role-pw")
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close(context.Background())
		// Before the database goes: its grants are the role's there.
		_, _ = admin.Exec(context.Background(), `DROP OWNED BY `+name)
		_, _ = admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+name)
	})
	return conn
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// waitFor polls cond until it holds, failing t after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cancelAt is a tracer that cancels a migration's context as its n-th
// statement starts (the lock session's included), counting all of them.
type cancelAt struct {
	n      int64
	seen   atomic.Int64
	cancel context.CancelFunc
}

func (c *cancelAt) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if c.seen.Add(1) == c.n {
		c.cancel()
	}
	return ctx
}

func (c *cancelAt) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestAnInterruptedMigrationRunsAgain: a migration from an empty database
// cut at any of its statements (the connection cancelled mid-step, in or
// outside a transaction) runs again and completes, to the schema an
// uninterrupted one builds.
func TestAnInterruptedMigrationRunsAgain(t *testing.T) {
	t.Parallel()
	ctx, clean := emptyDatabase(t)
	whole := &cancelAt{n: -1, cancel: func() {}}
	cfg := clean.Config()
	cfg.Tracer = whole
	counted, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Migrate(ctx, counted); err != nil {
		t.Fatal(err)
	}
	_ = counted.Close(ctx)
	want := schemaOf(ctx, t, clean)
	total := whole.seen.Load()
	const cuts = 24
	for i := range int64(cuts) {
		n := 1 + i*total/cuts
		t.Run(fmt.Sprintf("cut at statement %d of %d", n, total), func(t *testing.T) {
			t.Parallel()
			ctx, conn := emptyDatabase(t)
			mctx, cancel := context.WithCancel(ctx)
			defer cancel()
			cfg := conn.Config()
			cfg.Tracer = &cancelAt{n: n, cancel: cancel}
			cut, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrations.Migrate(mctx, cut); err == nil {
				t.Fatalf("the migration cut at statement %d completed", n)
			}
			_ = cut.Close(context.Background())
			again, err := pgx.ConnectConfig(ctx, conn.Config())
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close(context.Background())
			if _, err := migrations.Migrate(ctx, again); err != nil {
				t.Fatalf("the migration run again after a cut at statement %d: %v", n, err)
			}
			if got := schemaOf(ctx, t, conn); !slices.Equal(got, want) {
				t.Fatalf("after a cut at statement %d and a second run, the schema differs from an uninterrupted migration's", n)
			}
		})
	}
}
