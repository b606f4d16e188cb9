package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/db/migrations"
)

func TestMain(m *testing.M) { Main(m) }

// schemaQuery describes everything the migrations create in a database:
// columns, indexes, constraints, functions, triggers, grants and each
// table's row count, one sorted line per item.
const schemaQuery = `
SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
	SELECT format('column %s.%s.%s %s null=%s default=%s', table_schema, table_name, column_name,
		data_type, is_nullable, coalesce(column_default, '')) AS line
	FROM information_schema.columns WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
	UNION ALL
	SELECT format('index %s', indexdef) FROM pg_indexes
	WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
	UNION ALL
	SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint
	WHERE connamespace = 'public'::regnamespace
	UNION ALL
	SELECT format('function %s', pg_get_functiondef(oid)) FROM pg_proc
	WHERE pronamespace = 'public'::regnamespace
	UNION ALL
	SELECT format('trigger %s', pg_get_triggerdef(oid)) FROM pg_trigger WHERE NOT tgisinternal
	UNION ALL
	SELECT format('grant %s %s %s', grantee, table_name, privilege_type) FROM information_schema.role_table_grants
	WHERE table_schema = 'public'
	UNION ALL
	SELECT format('rows %s %s', table_name,
		(xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I.%I', table_schema, table_name), false, true, '')))[1]::text)
	FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
) items`

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func schema(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), schemaQuery).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func dbName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestNewPoolMatchesMigrating: a database from NewPool is at Latest and has
// exactly the schema and rows that running the embedded migrations on an
// empty database gives.
func TestNewPoolMatchesMigrating(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := NewPool(t)
	if err := migrations.Check(ctx, pool); err != nil {
		t.Fatalf("cloned database: %v", err)
	}

	fresh := connect(t, NewDatabase(t))
	if _, err := migrations.Migrate(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	want := schema(t, fresh)
	for _, item := range []string{"column public.payments.", "column public.burnpoller_schema_version.version", "rows burnpoller_schema_version 1"} {
		if !strings.Contains(want, item) {
			t.Fatalf("migrated schema has no %q:\n%s", item, want)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if got := schema(t, conn.Conn()); got != want {
		t.Fatalf("cloned schema differs from a migrated one\ncloned:\n%s\nmigrated:\n%s", got, want)
	}
}

// TestNewPoolDatabasesAreIndependent: what one test writes, another test's
// database does not see, and each is dropped when its test ends.
func TestNewPoolDatabasesAreIndependent(t *testing.T) { //nolint:tparallel // the parent checks what the subtest left once it has ended
	t.Parallel()
	ctx := context.Background()
	var first string
	t.Run("write", func(t *testing.T) {
		a, aURL := NewPool(t)
		b, bURL := NewPool(t)
		first = dbName(t, aURL)
		if first == dbName(t, bURL) {
			t.Fatalf("two tests share database %s", first)
		}
		if _, err := a.Exec(ctx, "CREATE TABLE pgtest_probe (x int)"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Exec(ctx, "UPDATE "+migrations.VersionTable+" SET version = 0"); err != nil {
			t.Fatal(err)
		}
		var probe *string
		if err := b.QueryRow(ctx, "SELECT to_regclass('pgtest_probe')::text").Scan(&probe); err != nil {
			t.Fatal(err)
		}
		if probe != nil {
			t.Fatalf("a table created in %s shows in %s", first, dbName(t, bURL))
		}
		if err := migrations.Check(ctx, b); err != nil {
			t.Fatalf("changing one database's version changed another's: %v", err)
		}
	})
	// The template is untouched by what a test does to its copy.
	c, _ := NewPool(t)
	if err := migrations.Check(ctx, c); err != nil {
		t.Fatalf("a later copy: %v", err)
	}
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", first).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s outlived its test", first)
	}
}

// TestTemplateRefusesSessions: nobody can connect to the template, so no
// session can make CREATE DATABASE … TEMPLATE fail, and none is left on it.
func TestTemplateRefusesSessions(t *testing.T) {
	t.Parallel()
	pool, _ := NewPool(t)
	u := ServerURL(t)
	u.Path = "/" + templateName
	conn, err := pgx.Connect(context.Background(), u.String())
	if err == nil {
		conn.Close(context.Background())
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55000" { // object_not_in_prerequisite_state
		t.Fatalf("connecting to the template: %v; want SQLSTATE 55000 (not accepting connections)", err)
	}
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", templateName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d sessions on the template", n)
	}
}

// TestSweepDropsOwnerlessTemplates: a template whose binary is gone is
// dropped; one whose owner session is alive is kept.
func TestSweepDropsOwnerlessTemplates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := ServerURL(t)
	conn := connect(t, admin.String())
	orphan := templatePrefix + "orphan" + randomHex(4)
	owned := templatePrefix + "owned" + randomHex(4)
	for _, name := range []string{orphan, owned} {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	}
	cfg, err := pgx.ParseConfig(admin.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = ownerPrefix + owned
	ownerConn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ownerConn.Close(ctx)

	if err := sweep(ctx, conn); err != nil {
		t.Fatal(err)
	}
	got, err := column(ctx, conn, "SELECT datname FROM pg_database WHERE datname = ANY($1) ORDER BY datname", []string{orphan, owned})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{owned}) {
		t.Fatalf("after the sweep: %v; want only %s", got, owned)
	}
}

// TestNewDatabaseIsEmpty: NewDatabase gives a database no migration has
// touched, for tests that migrate themselves.
func TestNewDatabaseIsEmpty(t *testing.T) {
	t.Parallel()
	conn := connect(t, NewDatabase(t))
	v, err := migrations.Current(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if v != 0 {
		t.Fatalf("schema version %d, want 0", v)
	}
	if s := schema(t, conn); s != "" {
		t.Fatalf("a new database has:\n%s", s)
	}
}

// stopRecorder is a testing.TB whose Fatalf and Skip record the message
// and end the goroutine, as the real ones do.
type stopRecorder struct {
	testing.TB
	fatal, skip string
	cleanups    int
}

func (r *stopRecorder) Helper()        {}
func (r *stopRecorder) Cleanup(func()) { r.cleanups++ }
func (r *stopRecorder) Skip(args ...any) {
	r.skip = strings.TrimSuffix(fmt.Sprintln(args...), "\n")
	runtime.Goexit()
}
func (r *stopRecorder) Fatalf(f string, args ...any) {
	r.fatal = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// TestNoClusterFailsInCI: a test that cannot get a throwaway cluster fails
// under CI=true, naming the reason, and skips elsewhere.
func TestNoClusterFailsInCI(t *testing.T) {
	reason := errors.New("no pg_ctl here")
	for _, tt := range []struct {
		name     string
		ci       string
		wantFail bool
	}{
		{name: "CI=true", ci: "true", wantFail: true},
		{name: "CI=1", ci: "1", wantFail: true},
		{name: "CI unset", ci: "", wantFail: false},
		{name: "CI=false", ci: "false", wantFail: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &stopRecorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				clusterOrStop(r, func() (*Cluster, error) { return nil, reason })
				t.Error("clusterOrStop returned without a cluster")
			}()
			<-done
			got, other := r.skip, r.fatal
			if tt.wantFail {
				got, other = r.fatal, r.skip
			}
			if !strings.Contains(got, reason.Error()) || other != "" {
				t.Errorf("fatal %q, skip %q; want the reason in the %s", r.fatal, r.skip, map[bool]string{true: "failure", false: "skip"}[tt.wantFail])
			}
			if r.cleanups != 0 {
				t.Errorf("%d cleanups registered without a cluster", r.cleanups)
			}
		})
	}
}

// TestNewCluster: a throwaway cluster answers, and is gone once its test
// has ended.
func TestNewCluster(t *testing.T) { //nolint:tparallel // the parent checks what the subtest left once it has ended
	t.Parallel()
	var u *url.URL
	t.Run("use", func(t *testing.T) {
		c := NewCluster(t)
		u = c.URL()
		if !answers(u) {
			t.Fatalf("cluster at %s does not answer", u.Redacted())
		}
	})
	if t.Failed() || u == nil {
		return
	}
	if answers(u) {
		t.Fatalf("cluster at %s still answers after its test", u.Redacted())
	}
}

// BenchmarkNewPool measures what a test pays for its migrated database.
func BenchmarkNewPool(b *testing.B) {
	for b.Loop() {
		NewPool(b)
	}
}
