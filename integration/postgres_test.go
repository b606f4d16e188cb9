package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/pgtopo"
	"github.com/burnpoller/burnpoller/webhooks"
)

// cursorAt is the live cursor in pool's database, -2 while there is none
// (or no table yet).
func cursorAt(pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT last_processed_block FROM block_cursors WHERE id NOT LIKE 'backfill:%'`).Scan(&n); err != nil {
		return -2
	}
	return n
}

// openPool opens a pool on dsn for the test's own reads.
func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestThroughPgBouncer: with DATABASE_URL pointing at PgBouncer in
// transaction mode, the live loop of two replicas (with rescans, the payment
// hook and webhook deliveries), a backfill, verify and events work with the
// ledger exact, under the default DATABASE_EXEC_MODE. What needs a session
// refuses with one clear line and exit 2 until DATABASE_DIRECT_URL names
// the server itself: migrations and events --follow.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	srv := pgtopo.Standalone(t)
	srv.Exec(t, "postgres", "CREATE DATABASE burn")
	bouncer := pgtopo.NewBouncer(t, srv)
	pooled, direct := bouncer.URL("burn"), srv.URL("burn")
	_, info := startDevchain(t, "--block-time", "50ms", "--payers", "4")
	last := sendBurns(t, info, 24, 6)

	// Deliveries land here; each event id counts once.
	var (
		mu        sync.Mutex
		delivered = map[string]bool{}
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delivered[r.Header.Get(webhooks.HeaderEventID)] = true
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)

	base := func(addr string, extra ...string) []string {
		env := pollerEnv(pooled, info.RPCURL, info, addr)
		return append(env, extra...)
	}
	// Migrations take a session lock: through the pooler alone, one line
	// and exit 2.
	out, code := runPoller(t, base(freeAddr(t)), "migrate")
	if code != 2 || !strings.Contains(out, "does not keep session state") || !strings.Contains(out, "DATABASE_DIRECT_URL") {
		t.Fatalf("migrate through PgBouncer without DATABASE_DIRECT_URL exited %d, want 2 and the reason:\n%s", code, out)
	}
	if lines := errorLines(out); len(lines) != 1 {
		t.Fatalf("want one error line, got:\n%s", strings.Join(lines, "\n"))
	}
	out, code = runPoller(t, base(freeAddr(t), "MIGRATE=true"), "run", "--until-finalized")
	if code != 2 || !strings.Contains(out, "DATABASE_DIRECT_URL") {
		t.Fatalf("run with MIGRATE=true through PgBouncer without DATABASE_DIRECT_URL exited %d, want 2:\n%s", code, out)
	}
	if out, code := runPoller(t, base(freeAddr(t), "DATABASE_DIRECT_URL="+direct), "migrate"); code != 0 {
		t.Fatalf("migrate with DATABASE_DIRECT_URL exited %d:\n%s", code, out)
	}
	admin := openPool(t, direct)
	if _, err := admin.Exec(context.Background(), `CREATE TABLE credited (payment_id bigint PRIMARY KEY, amount numeric NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	// Two replicas through the pooler, the session pool direct.
	settings := []string{
		"DATABASE_DIRECT_URL=" + direct, "MIGRATE=false",
		"PAYMENT_HOOK_SQL=INSERT INTO credited VALUES ($1, $10)",
		"RESCAN_DEPTH=1000", "RESCAN_INTERVAL=1s",
		"WEBHOOK_URL=" + receiver.URL + "/hook", "WEBHOOK_SECRET=0123456789abcdef-through-pgbouncer",
	}
	addrs := []string{freeAddr(t), freeAddr(t)}
	var replicas []*proc
	for i, addr := range addrs {
		replicas = append(replicas, startProc(t, fmt.Sprintf("replica-%d", i), base(addr, settings...), "poller"))
	}
	waitFor(t, 2*time.Minute, "the cursor past every burn", func() bool { return cursorBlock(t, admin) >= int64(last) })
	waitFor(t, time.Minute, "a rescan through the pooler", func() bool {
		var n float64
		for _, a := range addrs {
			v, _ := scrape(a, "burnpoller_rescans_total")
			n += v
		}
		return n >= 1
	})
	waitFor(t, time.Minute, "36 events delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == 36
	})
	for _, a := range addrs {
		if c, body := readyz(a); c != http.StatusOK {
			t.Fatalf("replica %s not ready through the pooler: %s", a, body)
		}
	}
	for _, p := range replicas {
		p.signal(syscall.SIGTERM)
		if c := p.wait(t, time.Minute); c != 0 {
			t.Fatalf("%s exited %d", p.name, c)
		}
	}
	to := uint64(cursorBlock(t, admin))
	rows := assertLedgerEqualsChain(t, admin, info.RPCURL, info.BurnContract, to)
	if len(rows) != 36 {
		t.Fatalf("%d payments, want 36", len(rows))
	}
	var credited int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM credited c JOIN payments p ON p.id = c.payment_id AND p.amount = c.amount`).Scan(&credited); err != nil {
		t.Fatal(err)
	}
	if credited != 36 {
		t.Fatalf("the hook credited %d payments, want 36", credited)
	}

	// One-shot commands through the pooler: a backfill of another group
	// (every burn already recorded: duplicates), verify, events.
	env := base(freeAddr(t), settings...)
	if out, code := runPoller(t, append(env, "CURSOR_ID=pgbouncer-backfill"), "backfill", "--from", "0", "--to", fmt.Sprint(to)); code != 0 {
		t.Fatalf("backfill through the pooler exited %d:\n%s", code, out)
	}
	out, code = runPoller(t, env, "verify", "--from", "0", "--to", fmt.Sprint(to), "--json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(lastLine(out)), &rep); err != nil || code != 0 || rep["clean"] != true || rep["chain_burns"] != float64(36) {
		t.Fatalf("verify through the pooler: exit %d, %v (%v):\n%s", code, rep, err, out)
	}
	out, code = runPoller(t, env, "events", "--json")
	if n := strings.Count(out, `"kind":"confirmed"`); code != 0 || n != 36 {
		t.Fatalf("events through the pooler: exit %d, %d confirmed events, want 36:\n%s", code, n, out)
	}
	assertLedgerEqualsChain(t, admin, info.RPCURL, info.BurnContract, to)

	// LISTEN needs a session too.
	noDirect := pollerEnv(pooled, info.RPCURL, info, freeAddr(t))
	out, code = runPoller(t, noDirect, "events", "--follow")
	if code != 2 || !strings.Contains(out, "DATABASE_DIRECT_URL") {
		t.Fatalf("events --follow through PgBouncer without DATABASE_DIRECT_URL exited %d, want 2:\n%s", code, out)
	}
}

// TestDatabaseTLS: sslmode=verify-full against a server whose certificate a
// CA made here signs; a CA that does not sign it is one line and exit 2 at
// start, and so is a connection without TLS where the server allows only
// TLS.
func TestDatabaseTLS(t *testing.T) {
	t.Parallel()
	srv := pgtopo.NewTLS(t)
	srv.Exec(t, "postgres", "CREATE DATABASE burn")
	_, info := startDevchain(t, "--block-time", "50ms", "--payers", "4")
	last := sendBurns(t, info, 8, 2)

	good := srv.VerifyFullURL("burn")
	addr := freeAddr(t)
	p := startProc(t, "replica", pollerEnv(good, info.RPCURL, info, addr), "poller")
	admin := openPool(t, good)
	waitFor(t, 2*time.Minute, "the cursor past every burn", func() bool { return cursorAt(admin) >= int64(last) })
	var ssl bool
	if err := admin.QueryRow(context.Background(), `SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '`+ledgerApp+`'`).Scan(&ssl); err != nil || !ssl {
		t.Fatalf("the replica's sessions are not all TLS: %v %v", ssl, err)
	}
	p.signal(syscall.SIGTERM)
	if c := p.wait(t, time.Minute); c != 0 {
		t.Fatalf("replica exited %d", c)
	}
	if rows := assertLedgerEqualsChain(t, admin, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, admin))); len(rows) != 12 {
		t.Fatalf("%d payments, want 12", len(rows))
	}

	for name, dsn := range map[string]string{
		"another CA":            strings.Replace(good, url.QueryEscape(srv.CAFile), url.QueryEscape(srv.OtherCAFile), 1),
		"no TLS":                strings.Replace(good, "sslmode=verify-full", "sslmode=disable", 1),
		"a CA file not present": strings.Replace(good, url.QueryEscape(srv.CAFile), url.QueryEscape(srv.CAFile+".missing"), 1),
	} {
		if dsn == good {
			t.Fatalf("%s: the connection string did not change", name)
		}
		out, code := runPoller(t, pollerEnv(dsn, info.RPCURL, info, freeAddr(t)), "run")
		if code != 2 {
			t.Fatalf("%s: run exited %d, want 2:\n%s", name, code, out)
		}
		lines := errorLines(out)
		if name == "a CA file not present" {
			// A configuration problem: printed before logging starts.
			if !strings.Contains(out, "DATABASE_URL: not a valid Postgres connection string: unable to read CA file") {
				t.Fatalf("%s: want the CA file named:\n%s", name, out)
			}
			continue
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "TLS") && !strings.Contains(lines[0], "pg_hba") {
			t.Fatalf("%s: want one clear error line, got:\n%s", name, out)
		}
	}
}
