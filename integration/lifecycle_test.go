package integration

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// waitActivity waits until a session of the poller runs a statement matching
// the SQL fragment and is blocked in it on a wait of the given
// pg_stat_activity.wait_event_type ("Lock" for a row lock, "Timeout" for
// pg_sleep), i.e. the poller is in that phase. Matching the text alone is
// not enough: start-up prepares PAYMENT_HOOK_SQL, which shows the hook's
// text as an active statement for a moment before any range transaction.
func waitActivity(t *testing.T, r *faultRun, fragment, waitType string) {
	t.Helper()
	waitFor(t, time.Minute, "the poller in: "+fragment, func() bool {
		return pollerSessions(t, r.pool, `state = 'active' AND query ILIKE '%' || $1 || '%' AND wait_event_type = $2`,
			fragment, waitType) > 0
	})
}

// TestShutdownAtEveryPhase sends SIGTERM while a replica waits for the lock,
// holds it before eth_getLogs, runs between the insert and the cursor
// update, and commits; and once with a transaction outliving
// SHUTDOWN_TIMEOUT. Each time the replica exits 0 and the ledger equals the
// chain up to the cursor. The phases that would hold the process longest (a
// lock wait of minutes, a transaction sleeping ten minutes) are made far
// longer than the guard the test waits with, so that exiting at all shows
// the bound held, without timing it.
func TestShutdownAtEveryPhase(t *testing.T) {
	const shutdown = 4 * time.Second
	tests := []struct {
		name  string
		env   []string
		setup func(t *testing.T, r *faultRun)
		// until waits for the phase; it returns once the replica is in it.
		until func(t *testing.T, r *faultRun)
		// sig is the signal sent; SIGTERM unless set.
		sig syscall.Signal
		// expect is what the in-flight transaction must have done: "advance"
		// (it finished and committed a range), "rollback" (nothing moved),
		// or "" (either, as long as the ledger is intact).
		expect string
		// logLine, if set, must be in the replica's output.
		logLine string
	}{
		{
			name: "waiting for the lock",
			setup: func(t *testing.T, r *faultRun) {
				t.Helper()
				// Another session holds the cursor row.
				conn, err := pgx.Connect(context.Background(), r.dbURL)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(context.Background()) })
				if _, err := conn.Exec(context.Background(), `INSERT INTO block_cursors (id, last_processed_block, updated_at)
					VALUES ($1, -1, now())`, "1337:"+strings.ToLower(r.info.BurnContract.Hex())); err != nil {
					t.Fatal(err)
				}
				tx, err := conn.Begin(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(context.Background(), `SELECT * FROM block_cursors FOR UPDATE`); err != nil {
					t.Fatal(err)
				}
			},
			env:    []string{"LOCK_WAIT=5m", "TX_TIMEOUT=10m"},
			until:  func(t *testing.T, r *faultRun) { t.Helper(); waitActivity(t, r, "FOR UPDATE", "Lock") },
			expect: "rollback",
		},
		{
			name: "holding the lock before eth_getLogs (SIGINT)",
			sig:  syscall.SIGINT,
			setup: func(t *testing.T, r *faultRun) {
				t.Helper()
				// Below RPC_TIMEOUT (1s), so the target call succeeds, slowly.
				r.proxies[0].Set(func(f *rpcfault.Faults) { f.DelayTarget = 700 * time.Millisecond })
			},
			until: func(t *testing.T, r *faultRun) {
				t.Helper()
				waitFor(t, time.Minute, "a delayed target request", func() bool {
					v, _ := scrape(r.addr, "burnpoller_lock_held")
					return v == 1 && r.proxies[0].Stats().Delayed > 3
				})
			},
		},
		{
			name: "between the insert and the cursor update",
			// The hook runs once per payment: about 1.5s for the first range's 36.
			env:    []string{"PAYMENT_HOOK_SQL=SELECT pg_sleep(0.04), $1::bigint"},
			until:  func(t *testing.T, r *faultRun) { t.Helper(); waitActivity(t, r, "pg_sleep(0.04)", "Timeout") },
			expect: "advance",
		},
		{
			name: "during commit",
			setup: func(t *testing.T, r *faultRun) {
				t.Helper()
				// A deferred trigger runs at COMMIT: the commit takes 1.5s.
				if _, err := r.pool.Exec(context.Background(), `
					CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$;
					CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON block_cursors
					DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();`); err != nil {
					t.Fatal(err)
				}
			},
			until:  func(t *testing.T, r *faultRun) { t.Helper(); waitActivity(t, r, "commit", "Timeout") },
			expect: "advance",
		},
		{
			name: "a transaction outliving SHUTDOWN_TIMEOUT",
			env:  []string{"PAYMENT_HOOK_SQL=SELECT pg_sleep(600), $1::bigint", "TX_TIMEOUT=20m"},
			until: func(t *testing.T, r *faultRun) {
				t.Helper()
				waitActivity(t, r, "pg_sleep(600)", "Timeout")
			},
			expect:  "rollback",
			logLine: "transaction ended by shutdown",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newFaultRun(t, 1)
			if tt.setup != nil {
				tt.setup(t, r)
			}
			r.startPoller(append([]string{fmt.Sprintf("SHUTDOWN_TIMEOUT=%s", shutdown)}, tt.env...)...)
			tt.until(t, r)
			before := cursorBlock(t, r.pool)
			sig := cmp.Or(tt.sig, syscall.SIGTERM)
			start := time.Now()
			r.poller.signal(sig)
			// A guard, not the assertion: without the bound the phase would
			// hold the process for minutes.
			if code := r.poller.wait(t, time.Minute); code != 0 {
				t.Fatalf("exit %d after %s", code, sig)
			}
			t.Logf("exited 0 %s after %s", time.Since(start).Round(time.Millisecond), sig)
			if tt.logLine != "" && !strings.Contains(r.poller.out.String(), tt.logLine) {
				t.Fatalf("no %q log line", tt.logLine)
			}
			after := cursorBlock(t, r.pool)
			if tt.expect == "advance" && after <= before {
				t.Fatalf("the in-flight transaction did not finish: cursor %d, was %d", after, before)
			}
			if tt.expect == "rollback" && after != before {
				t.Fatalf("cursor moved from %d to %d, want the transaction rolled back", before, after)
			}
			if after >= 0 {
				assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(after))
			} else if n := countPayments(t, r.pool); n != 0 {
				t.Fatalf("%d payments without a cursor", n)
			}
		})
	}
}

// TestSecondSignalExitsAtOnce: a second signal during a slow shutdown ends
// the process at once with exit 1; the transaction in flight never commits.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	r.startPoller("PAYMENT_HOOK_SQL=SELECT pg_sleep(600), $1::bigint", "TX_TIMEOUT=20m", "SHUTDOWN_TIMEOUT=10m")
	waitActivity(t, r, "pg_sleep(600)", "Timeout")
	before := cursorBlock(t, r.pool)
	r.poller.signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "the first signal noted", func() bool {
		return strings.Contains(r.poller.out.String(), "signal received; stopping")
	})
	// Without the second signal the process would wait up to
	// SHUTDOWN_TIMEOUT (10m) for the hook; exit 1 within the guard is the
	// immediate exit.
	r.poller.signal(syscall.SIGINT)
	if code := r.poller.wait(t, time.Minute); code != 1 {
		t.Fatalf("exit %d after a second signal, want 1", code)
	}
	if !strings.Contains(r.poller.out.String(), "second signal; exiting now") {
		t.Fatal("no log line for the second signal")
	}
	// The process is gone, so its transaction can never commit; its backend
	// sleeps on until Postgres notices. End it, then check nothing moved.
	if _, err := r.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = '`+ledgerApp+`'`); err != nil {
		t.Fatal(err)
	}
	if after := cursorBlock(t, r.pool); after != before {
		t.Fatalf("cursor moved from %d to %d", before, after)
	}
	if before < 0 {
		if n := countPayments(t, r.pool); n != 0 {
			t.Fatalf("%d payments without a cursor", n)
		}
	} else {
		assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(before))
	}
}

// TestDatabaseDownAtStart starts a replica while Postgres is stopped: it
// waits, says so on /readyz, and becomes ready when Postgres returns.
func TestDatabaseDownAtStart(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	dbURL := *cluster.URL()
	conn, err := pgx.Connect(context.Background(), dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE ledger"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	dbURL.Path = "/ledger"
	cluster.Stop()

	_, info := startDevchain(t, "--block-time", "50ms", "--burn-rate", "5")
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL.String(), info.RPCURL, info, addr), "poller")
	waitFor(t, time.Minute, "readiness naming the database", func() bool {
		c, body := readyz(addr)
		return c == 503 && strings.Contains(body, `"database":"unreachable"`)
	})
	if c := httpStatus("http://" + addr + "/livez"); c != 200 {
		t.Fatalf("/livez = %d while waiting for the database", c)
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "ready once Postgres is back", func() bool { c, _ := readyz(addr); return c == 200 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestNodeDownAtStart starts a replica while its node does not answer.
func TestNodeDownAtStart(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "50ms", "--burn-rate", "5")
	pool, dbURL := pgtest.NewPool(t)
	nodeAddr := freeAddr(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, "http://"+nodeAddr, info, addr), "poller")
	waitFor(t, time.Minute, "readiness naming the node", func() bool {
		c, body := readyz(addr)
		return c == 503 && strings.Contains(body, `"node":"unreachable"`) && strings.Contains(body, `"database":"ok"`)
	})
	proxy, err := rpcfault.StartAt(nodeAddr, info.RPCURL)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	waitFor(t, time.Minute, "ready once the node answers", func() bool { c, _ := readyz(addr); return c == 200 })
	waitFor(t, time.Minute, "a committed range", func() bool { return cursorBlock(t, pool) >= 0 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestNewerSchemaRefused: a schema a later release migrated further runs
// this binary until a contract step of that release retires it; then
// start-up is refused with one clear error naming the release to roll to.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "200ms")
	pool, dbURL := pgtest.NewPool(t)
	next := migrations.Latest() + 1
	if _, err := pool.Exec(context.Background(), "UPDATE "+migrations.VersionTable+" SET version = $1", next); err != nil {
		t.Fatal(err)
	}
	// Expanded only: the replica runs and records.
	addr := freeAddr(t)
	p := startProc(t, "expanded", pollerEnv(dbURL, info.RPCURL, info, addr), "poller")
	waitFor(t, time.Minute, "a committed range on a schema a later release expanded", func() bool { return cursorBlock(t, pool) >= 0 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d on a schema a later release expanded", code)
	}
	// Retired by the later release's contract step.
	if _, err := pool.Exec(context.Background(), `INSERT INTO schema_contracts (version, name, release, forced) VALUES ($1, 'next.sql', 'v9.0.0 (revision abc)', false)`, next); err != nil {
		t.Fatal(err)
	}
	for _, migrate := range []string{"true", "false"} {
		out, code := runPoller(t, pollerEnv(dbURL, info.RPCURL, info, freeAddr(t), "MIGRATE="+migrate), "run")
		if code != 1 {
			t.Fatalf("MIGRATE=%s: exit %d, want 1:\n%s", migrate, code, out)
		}
		if n := strings.Count(out, `"level":"ERROR"`); n != 1 || !strings.Contains(out, "newer than this binary") || !strings.Contains(out, "roll to burnpoller v9.0.0 (revision abc)") {
			t.Fatalf("MIGRATE=%s: want one clear error line naming the release to roll to:\n%s", migrate, out)
		}
	}
}

// TestEveryBadVariableExitsTwo runs the binary with each variable set to a
// bad value: exit 2 and one line naming it.
func TestEveryBadVariableExitsTwo(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"DATABASE_URL":  "postgres://burn:secretpw@127.0.0.1:1/burn",
		"RPC_URL":       "http://127.0.0.1:1",
		"CHAIN_ID":      "1337",
		"BURN_CONTRACT": "0x4b352ded1403ef22eb738f2ef72cef4349648fd9",
		// Valid, and inert without WEBHOOK_URL.
		"WEBHOOK_SECRET": "0123456789abcdef-webhook",
	}
	bad := map[string]string{
		"DATABASE_URL":           "postgres://a:b@host:notaport/db",
		"DATABASE_DIRECT_URL":    "postgres://a:b@host:notaport/db",
		"DATABASE_EXEC_MODE":     "prepared",
		"DATABASE_MAX_CONNS":     "0",
		"RPC_URL":                "ftp://node.example",
		"RPC_WS_URL":             "http://node.example:8546",
		"CHAIN_ID":               "zero",
		"BURN_CONTRACT":          "0x1234",
		"START_BLOCK":            "-1",
		"CURSOR_ID":              "has space",
		"FINALITY":               "final",
		"CONFIRMATIONS":          "ten",
		"POLL_INTERVAL":          "5",
		"MAX_BLOCK_RANGE":        "0",
		"VERIFY_RECEIPTS":        "sometimes",
		"RPC_QUORUM":             "3",
		"RPC_COMPUTE_UNITS":      "eth_getLogs=many",
		"ALLOW_CONTRACT_REMOVAL": "perhaps",
		"LOCK_WAIT":              "1ms",
		"TX_TIMEOUT":             "forever",
		"RPC_TIMEOUT":            "0s",
		"RESCAN_DEPTH":           "deep",
		"RESCAN_INTERVAL":        "1ms",
		"HTTP_ADDR":              "8080",
		"SHUTDOWN_TIMEOUT":       "0s",
		"LOG_LEVEL":              "loud",
		"LOG_FORMAT":             "xml",
		"MIGRATE":                "maybe",
		"ALLOW_HOOK_CHANGE":      "perhaps",
		"PENDING":                "sometimes",
		"PENDING_MAX_BLOCKS":     "0",
		"WEBHOOK_URL":            "ftp://hooks.example/in",
		"WEBHOOK_SECRET":         "short",
		"WEBHOOK_EVENTS":         "paid",
		"WEBHOOK_TIMEOUT":        "1ms",
		"WEBHOOK_MAX_AGE":        "forever",
		"GROUPS":                 "eth-main",
	}
	for key, value := range bad {
		env := []string{}
		for k, v := range good {
			if k != key {
				env = append(env, k+"="+v)
			}
		}
		env = append(env, key+"="+value)
		out, code := runPoller(t, env, "run")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], key+":") {
			t.Errorf("%s=%q: exit %d, output:\n%s", key, value, code, out)
		}
		if strings.Contains(out, "secretpw") {
			t.Errorf("%s=%q: the output shows the database password", key, value)
		}
	}
	// Every variable the binary documents is in the table.
	out, _ := runPoller(t, nil, "config")
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "poller:") {
			if _, ok := bad[f[0]]; !ok && f[0] != "PAYMENT_HOOK_SQL" {
				t.Errorf("variable %s has no bad value in this test", f[0])
			}
		}
	}
}
