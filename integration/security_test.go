package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// applyRoles runs db/roles.sql for database db with role names made unique
// for this test (roles are cluster-wide) and returns them.
func applyRoles(t *testing.T, adminDB string, db string) (migrateRole, runtimeRole string) {
	t.Helper()
	b, err := os.ReadFile("../db/roles.sql")
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomSuffix()
	migrateRole, runtimeRole = "bpm_"+suffix, "bpr_"+suffix
	sql := strings.NewReplacer(
		"burnpoller_migrate", migrateRole,
		"burnpoller_runtime", runtimeRole,
		":migrate_password", "'migrate-pw'",
		":runtime_password", "'runtime-pw'",
		`:"db"`, `"`+db+`"`,
	).Replace(string(b))
	conn, err := pgx.Connect(context.Background(), adminDB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("db/roles.sql: %v", err)
	}
	t.Cleanup(func() {
		// After the database is dropped (cleanups run in reverse order).
		c, err := pgx.Connect(context.Background(), pgtest.ServerURL(t).String())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, db))
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s`, runtimeRole, migrateRole))
	})
	return migrateRole, runtimeRole
}

// asRole returns dbURL with another user and password.
func asRole(t *testing.T, dbURL, role, password string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	return u.String()
}

// TestRuntimeRoleRunsButCannotChangeTheSchema applies db/roles.sql, migrates
// as the migration role, runs a replica with MIGRATE=false as the runtime
// role, and checks the runtime role cannot alter the schema or delete.
func TestRuntimeRoleRunsButCannotChangeTheSchema(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	migrateRole, runtimeRole := applyRoles(t, dbURL, db)
	migrateURL := asRole(t, dbURL, migrateRole, "migrate-pw")
	runtimeURL := asRole(t, dbURL, runtimeRole, "runtime-pw")

	if out, code := runPoller(t, []string{"DATABASE_URL=" + migrateURL}, "migrate"); code != 0 {
		t.Fatalf("migrate as %s: exit %d\n%s", migrateRole, code, out)
	}

	r := newFaultRun(t, 0)
	addr := freeAddr(t)
	p := startProc(t, "runtime-replica", pollerEnv(runtimeURL, r.info.RPCURL, r.info, addr, "MIGRATE=false"), "poller")
	admin, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	waitFor(t, 2*time.Minute, "the runtime role's replica past the last burn", func() bool {
		var n int64
		err := admin.QueryRow(context.Background(), `SELECT coalesce(max(last_processed_block), -1) FROM block_cursors`).Scan(&n)
		return err == nil && n >= int64(r.lastBurn)
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rows int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 36 {
		t.Fatalf("%d payments recorded under the runtime role, want 36", rows)
	}

	rt, err := pgx.Connect(context.Background(), runtimeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	for _, sql := range []string{
		`ALTER TABLE payments ADD COLUMN note text`,
		`DROP TABLE block_cursors`,
		`CREATE TABLE sneaky (x int)`,
		`DELETE FROM payments`,
		`TRUNCATE payments`,
		`DELETE FROM payment_events`,
		`UPDATE payment_events SET amount = 0`,
		`UPDATE burnpoller_schema_version SET version = 99`,
		`CREATE INDEX ON payments (amount)`,
	} {
		if _, err := rt.Exec(context.Background(), sql); err == nil || !strings.Contains(err.Error(), "42501") && !strings.Contains(err.Error(), "must be owner") {
			t.Errorf("runtime role: %q = %v, want permission denied", sql, err)
		}
	}

	// No temporary tables either: one named payments would shadow the
	// ledger for the rest of the session.
	for _, sql := range []string{
		`CREATE TEMP TABLE payments (id bigint, tx_hash text, amount numeric)`,
		`CREATE TEMPORARY TABLE scratch AS SELECT 1 AS x`,
	} {
		_, err := rt.Exec(context.Background(), sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "temporary tables") {
			t.Errorf("runtime role: %q = %v, want permission denied to create temporary tables (42501)", sql, err)
		}
	}
	var schema string
	if err := rt.QueryRow(context.Background(), `SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 'payments'::regclass`).Scan(&schema); err != nil {
		t.Fatal(err)
	} else if schema != "public" {
		t.Errorf("payments resolves to a table in %q for the runtime role, want the ledger in public", schema)
	}
}

// TestNoSecretInAnyOutput runs a replica with a database password and an RPC
// URL carrying API keys, makes it log errors about both, and searches every
// log line, /metrics, /readyz, /livez and the command outputs for them.
func TestNoSecretInAnyOutput(t *testing.T) {
	t.Parallel()
	const (
		dbPassword = "Db-Pass-4242-secret"
		pathKey    = "0123456789abcdef0123456789abcdef"
		queryKey   = "QueryKey5150zzz"
		userKey    = "UserKey9876yyy"
	)
	r := newFaultRun(t, 1)
	dbURL := asRole(t, r.dbURL, "postgres", dbPassword) // trust auth: any password works
	rpcURL := fmt.Sprintf("http://%s:%s@%s/v3/%s?apikey=%s", userKey, userKey+"pw",
		strings.TrimPrefix(r.proxies[0].URL, "http://"), pathKey, queryKey)
	secrets := []string{dbPassword, pathKey, queryKey, userKey}

	// Errors that quote the endpoint: 500s, a hang, a 401.
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.ServerErrors, f.Hang = 3, 1 })
	env := pollerEnv(dbURL, rpcURL, r.info, r.addr)
	p := startProc(t, "poller", env, "poller")
	r.poller = p
	r.caughtUp(2 * time.Minute)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.Unauthorized = 3 })
	waitFor(t, time.Minute, "a 401 to be seen", func() bool { return r.proxies[0].Stats().Unauthorized >= 1 })

	var outputs []string
	for _, path := range []string{"/metrics", "/readyz", "/livez"} {
		resp, err := http.Get("http://" + r.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		outputs = append(outputs, path+": "+string(b))
	}
	p.signal(syscall.SIGTERM)
	p.wait(t, 15*time.Second)
	outputs = append(outputs, "logs: "+p.out.String())
	for _, args := range [][]string{{"config"}, {"cursor", "show"}, {"verify", "--from", "0", "--to", "5"}} {
		out, _ := runPoller(t, env, args...)
		outputs = append(outputs, strings.Join(args, " ")+": "+out)
	}
	// A broken database URL and a bad RPC URL, reported at start.
	out, _ := runPoller(t, append(env, "DATABASE_URL=postgres://u:"+dbPassword+"@host:notaport/db",
		"RPC_URL=ftp://"+userKey+"@x/"+pathKey), "run")
	outputs = append(outputs, "bad config: "+out)

	if !strings.Contains(strings.Join(outputs, "\n"), "xxxxx") {
		t.Fatal("no redacted value anywhere: the endpoint was never mentioned, so the test proves nothing")
	}
	for _, o := range outputs {
		for _, s := range secrets {
			if i := strings.Index(o, s); i >= 0 {
				t.Errorf("secret %q appears in %s", s, o[max(0, i-200):min(len(o), i+100)])
			}
		}
	}
}
