package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/payments"
)

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// roles are db/roles.sql's roles, named uniquely for one test (roles are
// cluster-wide).
type roles struct{ migrate, runtime, consumer string }

// applyRoles runs db/roles.sql for database db with role names made unique
// for this test and returns them.
func applyRoles(t *testing.T, adminDB string, db string) (migrateRole, runtimeRole string) {
	t.Helper()
	r := applyAllRoles(t, adminDB, db)
	return r.migrate, r.runtime
}

// applyAllRoles is applyRoles returning the consumer role too.
func applyAllRoles(t *testing.T, adminDB string, db string) roles {
	t.Helper()
	b, err := os.ReadFile("../db/roles.sql")
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomSuffix()
	migrateRole, runtimeRole, consumerRole := "bpm_"+suffix, "bpr_"+suffix, "bpc_"+suffix
	sql := strings.NewReplacer(
		"burnpoller_migrate", migrateRole,
		"burnpoller_runtime", runtimeRole,
		"burnpoller_consumer", consumerRole,
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
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s`,
			runtimeRole, migrateRole, consumerRole))
	})
	return roles{migrate: migrateRole, runtime: runtimeRole, consumer: consumerRole}
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
		// Of the ledger, only orphaned_at (a cursor reset's) is the
		// writers' to update; the consumers' tables are not theirs.
		`UPDATE payments SET amount = amount * 1000`,
		`UPDATE payments SET payer = payer, orphaned_at = NULL`,
		`UPDATE rejected_logs SET reason = 'x'`,
		`SELECT count(*) FROM consumer_offsets`,
		`INSERT INTO consumer_offsets (name, last_seq) VALUES ('billing', 0)`,
		`UPDATE consumer_offsets SET last_seq = 0`,
		`SELECT count(*) FROM consumer_names`,
	} {
		if _, err := rt.Exec(context.Background(), sql); err == nil || !strings.Contains(err.Error(), "42501") && !strings.Contains(err.Error(), "must be owner") {
			t.Errorf("runtime role: %q = %v, want permission denied", sql, err)
		}
	}

	// What a cursor reset updates, it may.
	if tag, err := rt.Exec(context.Background(), `UPDATE payments SET orphaned_at = orphaned_at WHERE orphaned_at IS NOT NULL`); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("runtime role: marking payments orphaned = %v, %v; want allowed", tag, err)
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
		bareKey    = "BareKey0123abcd" // a query parameter without a value
		wsKey      = "WsBareKey0456ef"
	)
	r := newFaultRun(t, 1)
	dbURL := asRole(t, r.dbURL, "postgres", dbPassword) // trust auth: any password works
	rpcURL := fmt.Sprintf("http://%s:%s@%s/v3/%s?apikey=%s&%s", userKey, userKey+"pw",
		strings.TrimPrefix(r.proxies[0].URL, "http://"), pathKey, queryKey, bareKey)
	secrets := []string{dbPassword, pathKey, queryKey, userKey, bareKey, wsKey}

	// Errors that quote the endpoint: 500s, a hang, a 401, and a newHeads
	// endpoint on a port where nothing listens.
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.ServerErrors, f.Hang = 3, 1 })
	env := pollerEnv(dbURL, rpcURL, r.info, r.addr, "RPC_WS_URL=ws://127.0.0.1:1/ws?"+wsKey)
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

// TestConsumerRolesAreConfinedToTheirNames: two services consume payment
// events under login roles of their own, both members of db/roles.sql's
// consumer role. Each reads and moves its own offsets only: the
// "reporting" service cannot see, move, reset, take over or delete the
// offset of the "billing" one, nor make a row that names billing's role its
// owner; and neither can rewrite the event log.
func TestConsumerRolesAreConfinedToTheirNames(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	r := applyAllRoles(t, dbURL, db)
	if out, code := runPoller(t, []string{"DATABASE_URL=" + asRole(t, dbURL, r.migrate, "migrate-pw")}, "migrate"); code != 0 {
		t.Fatalf("migrate as %s: exit %d\n%s", r.migrate, code, out)
	}
	admin := openPool(t, dbURL)
	billing, reporting := "bill_"+randomSuffix(), "rep_"+randomSuffix()
	for _, role := range []string{billing, reporting} {
		if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw' IN ROLE %s`, role, r.consumer)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), pgtest.ServerURL(t).String())
			if err != nil {
				return
			}
			defer c.Close(context.Background())
			_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP OWNED BY %s; DROP ROLE IF EXISTS %s`, role, role))
		})
	}
	// Three events, as a writer records them.
	store := payments.NewStore(openPool(t, asRole(t, dbURL, r.runtime, "runtime-pw")))
	tx, err := store.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var evs []payments.Event
	for i := range 3 {
		evs = append(evs, payments.EventFor(payments.KindConfirmed, payments.Payment{ChainID: 1337,
			Contract: "0x" + strings.Repeat("ab", 20), TxHash: fmt.Sprintf("0x%064x", i+1), BlockNumber: 9,
			BlockHash: "0x" + strings.Repeat("cd", 32), Payer: "0x" + strings.Repeat("12", 20),
			Digest: "0x" + strings.Repeat("34", 32), Amount: big.NewInt(int64(i + 1)), BurnedAt: time.Unix(1_700_000_000, 0)}, int64(i+1)))
	}
	if _, err := tx.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	consumeAll := func(pool *pgxpool.Pool, name string) error {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		return consume.Run(cctx, pool, name, func(context.Context, pgx.Tx, payments.Event) error { return nil },
			consume.PollInterval(50*time.Millisecond), consume.NoListen(),
			consume.OnProgress(func(p consume.Progress) {
				if p.Lag() == 0 {
					stop()
				}
			}))
	}
	billingPool := openPool(t, asRole(t, dbURL, billing, "pw"))
	reportingPool := openPool(t, asRole(t, dbURL, reporting, "pw"))
	if err := consumeAll(billingPool, "billing"); err != nil {
		t.Fatalf("billing's consumer: %v", err)
	}
	if err := consumeAll(reportingPool, "reporting"); err != nil {
		t.Fatalf("reporting's consumer: %v", err)
	}

	// What reporting cannot do to billing's offset.
	var seen int
	if err := reportingPool.QueryRow(ctx, `SELECT count(*) FROM consumer_offsets WHERE name = 'billing'`).Scan(&seen); err != nil || seen != 0 {
		t.Fatalf("reporting sees %d of billing's offset rows (%v), want 0", seen, err)
	}
	if tag, err := reportingPool.Exec(ctx, `UPDATE consumer_offsets SET last_seq = 0, event_id = NULL WHERE name = 'billing'`); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("reporting moved billing's offset: %v, %v", tag, err)
	}
	if err := consume.Reset(ctx, reportingPool, "billing", 0); !errors.Is(err, consume.ErrNotOwner) {
		t.Fatalf("reporting resetting billing's offset = %v, want ErrNotOwner", err)
	}
	// Nor through a look-alike of the catalog: a temporary view named
	// pg_roles, first in its search path, must not make it billing.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`GRANT TEMPORARY ON DATABASE %q TO %s`, db, reporting)); err != nil {
		t.Fatal(err)
	}
	spoof, err := pgx.Connect(ctx, asRole(t, dbURL, reporting, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer spoof.Close(ctx)
	if _, err := spoof.Exec(ctx, fmt.Sprintf(`CREATE TEMP VIEW pg_roles AS SELECT '%s'::name AS rolname, oid FROM pg_catalog.pg_roles WHERE rolname = current_user;
		CREATE TEMP TABLE consumer_names (name text PRIMARY KEY, registered_at timestamptz, owner text)`, billing)); err != nil {
		t.Fatal(err)
	}
	if tag, err := spoof.Exec(ctx, `UPDATE public.consumer_offsets SET last_seq = 0, event_id = NULL WHERE name = 'billing'`); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("reporting moved billing's offset through a temporary pg_roles: %v, %v", tag, err)
	}
	if _, err := spoof.Exec(ctx, `INSERT INTO public.consumer_offsets (name, last_seq) VALUES ('squatted', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := consumeAll(reportingPool, "billing"); !errors.Is(err, consume.ErrNotOwner) || !strings.Contains(err.Error(), billing) {
		t.Fatalf("reporting running billing's consumer = %v, want ErrNotOwner naming %s", err, billing)
	}
	for _, sql := range []string{
		`DELETE FROM consumer_offsets`,
		`TRUNCATE consumer_offsets`,
		fmt.Sprintf(`INSERT INTO consumer_offsets (name, last_seq, owner) VALUES ('other', 0, '%s')`, billing),
		fmt.Sprintf(`UPDATE consumer_offsets SET owner = '%s'`, billing),
		`UPDATE consumer_names SET owner = NULL`,
		`DELETE FROM consumer_names`,
		`UPDATE payment_events SET amount = 0`,
		`INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		 SELECT chain_id, contract, tx_hash, 9, block_number, block_hash, payer, digest, amount, burned_at FROM payment_events LIMIT 1`,
	} {
		var pgErr *pgconn.PgError
		if _, err := reportingPool.Exec(ctx, sql); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("reporting: %q = %v, want permission denied (42501)", sql, err)
		}
	}
	// And the same the other way round; each still at the last event.
	if err := billingPool.QueryRow(ctx, `SELECT count(*) FROM consumer_offsets WHERE name = 'reporting'`).Scan(&seen); err != nil || seen != 0 {
		t.Fatalf("billing sees %d of reporting's offset rows (%v), want 0", seen, err)
	}
	rows, err := admin.Query(ctx, `SELECT name || ' ' || last_seq || ' ' || owner FROM consumer_offsets ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"billing 3 " + billing, "reporting 3 " + reporting, "squatted 0 " + reporting}; !slices.Equal(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
	// The name reporting inserted beside a temporary consumer_names is
	// registered in the real one, for reporting.
	var registeredFor string
	if err := admin.QueryRow(ctx, `SELECT owner FROM public.consumer_names WHERE name = 'squatted'`).Scan(&registeredFor); err != nil || registeredFor != reporting {
		t.Fatalf("squatted registered for %q (%v), want %s", registeredFor, err, reporting)
	}

	// A service whose login roles rotate names a group role its logins
	// are members of: the next login carries on the same name.
	group, first, second := "grp_"+randomSuffix(), "lg1_"+randomSuffix(), "lg2_"+randomSuffix()
	for _, sql := range []string{
		fmt.Sprintf(`CREATE ROLE %s NOLOGIN IN ROLE %s`, group, r.consumer),
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw' IN ROLE %s`, first, group),
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw' IN ROLE %s`, second, group),
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.ServerURL(t).String())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s`, first, second, group))
	})
	if err := consumeOwned(ctx, openPool(t, asRole(t, dbURL, first, "pw")), "payouts", group); err != nil {
		t.Fatalf("the first login's consumer: %v", err)
	}
	if err := consume.Reset(ctx, openPool(t, asRole(t, dbURL, second, "pw")), "payouts", 1); err != nil {
		t.Fatalf("the next login resetting the group's name: %v", err)
	}
	if err := consumeOwned(ctx, openPool(t, asRole(t, dbURL, second, "pw")), "payouts", group); err != nil {
		t.Fatalf("the next login's consumer: %v", err)
	}
	if err := admin.QueryRow(ctx, `SELECT owner FROM consumer_offsets WHERE name = 'payouts' AND last_seq = 3`).Scan(&registeredFor); err != nil || registeredFor != group {
		t.Fatalf("payouts owned by %q at seq 3 (%v), want %s", registeredFor, err, group)
	}
}

// consumeOwned runs consume.Run for name, owned by owner, until it has
// handled every event.
func consumeOwned(ctx context.Context, pool *pgxpool.Pool, name, owner string) error {
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	return consume.Run(cctx, pool, name, func(context.Context, pgx.Tx, payments.Event) error { return nil },
		consume.PollInterval(50*time.Millisecond), consume.NoListen(), consume.Owner(owner),
		consume.OnProgress(func(p consume.Progress) {
			if p.Lag() == 0 {
				stop()
			}
		}))
}

// TestConsumersKeepTheirOffsetsThroughTheUpgrade: a service consumed
// events under a role of its own with the grants the documentation gave
// before migration 20 (SELECT, INSERT and UPDATE on consumer_offsets).
// Migrated to this release, its offset row, which has no owner, is still
// its to read and move, the consumer goes on from it, and Reset works;
// a read-only role (a reporting role that may read every table, or
// pg_read_all_data) is not given writes by the migration.
func TestConsumersKeepTheirOffsetsThroughTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.MigrateTo(ctx, conn, 16); err != nil {
		t.Fatal(err)
	}
	svc, reader := "old_"+randomSuffix(), "ro_"+randomSuffix()
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), pgtest.ServerURL(t).String())
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE); DROP ROLE IF EXISTS %s; DROP ROLE IF EXISTS %s`, db, svc, reader))
	})
	for _, sql := range []string{
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw'`, svc),
		fmt.Sprintf(`GRANT SELECT ON payment_events, burnpoller_schema_version TO %s`, svc),
		fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE ON consumer_offsets TO %s`, svc),
		fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'pw' IN ROLE pg_read_all_data`, reader),
		`INSERT INTO consumer_offsets (name, last_seq) VALUES ('billing', 0)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	store := payments.NewStore(openPool(t, dbURL))
	tx, err := store.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindSeen, payments.Payment{ChainID: 1337,
			Contract: "0x" + strings.Repeat("ab", 20), TxHash: fmt.Sprintf("0x%064x", i+1), BlockNumber: 9,
			BlockHash: "0x" + strings.Repeat("cd", 32), Payer: "0x" + strings.Repeat("12", 20),
			Digest: "0x" + strings.Repeat("34", 32), Amount: big.NewInt(1), BurnedAt: time.Unix(1_700_000_000, 0)}, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	pool := openPool(t, asRole(t, dbURL, svc, "pw"))
	if err := consumeOwned(ctx, pool, "billing", svc); err != nil {
		t.Fatalf("the service's consumer after the upgrade: %v", err)
	}
	if err := consume.Reset(ctx, pool, "billing", 1); err != nil {
		t.Fatalf("Reset after the upgrade: %v", err)
	}
	var owner *string
	var seq int64
	if err := conn.QueryRow(ctx, `SELECT last_seq, owner FROM consumer_offsets WHERE name = 'billing'`).Scan(&seq, &owner); err != nil || seq != 1 || owner != nil {
		t.Fatalf("billing at %d owned by %v (%v), want 1 and no owner", seq, owner, err)
	}
	ro := openPool(t, asRole(t, dbURL, reader, "pw"))
	var pgErr *pgconn.PgError
	if _, err := ro.Exec(ctx, `INSERT INTO consumer_offsets (name, last_seq) VALUES ('payouts', 0)`); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("a read-only role inserting an offset = %v, want permission denied", err)
	}
}
