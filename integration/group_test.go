package integration

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errorLines returns the lines of out logged at level ERROR.
func errorLines(out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		if strings.Contains(line, `"level":"ERROR"`) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// TestWritersOfAGroupAgreeOnTheHook: a backfill or a replica whose
// PAYMENT_HOOK_SQL differs from the one recorded for its contract would
// record payments the replicas' hook never credits; it is refused with exit 2 and one
// clear line, unless told (--allow-hook-mismatch for a backfill,
// ALLOW_HOOK_CHANGE=true for a replica, which then becomes the group's hook
// and makes the others stop writing).
func TestWritersOfAGroupAgreeOnTheHook(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 0)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	if _, err := r.pool.Exec(t.Context(), `CREATE TABLE credited (payment_id bigint PRIMARY KEY, hook text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	hookA := `INSERT INTO credited VALUES ($1, 'a')`
	hookB := `INSERT INTO credited VALUES ($1, 'b')`
	base := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)

	// The first replica records hook A as the group's, and credits with it.
	first := startProc(t, "replica-a", append(base, "PAYMENT_HOOK_SQL="+hookA), "poller")
	r.caughtUp(time.Minute)

	// A backfill with hook B is refused before it writes anything.
	out, code := runPoller(t, append(base, "PAYMENT_HOOK_SQL="+hookB, "HTTP_ADDR="+freeAddr(t)), "backfill", "--from", "0", "--to", fmt.Sprint(to), "--restart")
	if code != 2 {
		t.Fatalf("backfill with another hook exited %d, want 2:\n%s", code, out)
	}
	if lines := errorLines(out); len(lines) != 1 || !strings.Contains(lines[0], "PAYMENT_HOOK_SQL differs from the one recorded for this contract") {
		t.Fatalf("want one clear error line, got:\n%s", strings.Join(lines, "\n"))
	}
	if strings.Contains(out, "INSERT INTO credited") {
		t.Fatal("the hook's text was logged")
	}
	// So is one under another group (CURSOR_ID) and with no hook at all:
	// who inserts a payment depends on the contract, not the group.
	out, code = runPoller(t, append(base, "CURSOR_ID=elsewhere", "HTTP_ADDR="+freeAddr(t)), "backfill", "--from", "0", "--to", fmt.Sprint(to))
	if code != 2 || !strings.Contains(out, "records a hook, this process runs no hook") {
		t.Fatalf("backfill of another group without the hook exited %d, want 2:\n%s", code, out)
	}
	// Told to, it runs; the payments exist already, so it credits nothing.
	out, code = runPoller(t, append(base, "PAYMENT_HOOK_SQL="+hookB), "backfill", "--from", "0", "--to", fmt.Sprint(to), "--allow-hook-mismatch")
	if code != 0 {
		t.Fatalf("backfill --allow-hook-mismatch exited %d:\n%s", code, out)
	}

	// A replica with hook B is refused too.
	out, code = runPoller(t, append(base, "PAYMENT_HOOK_SQL="+hookB, "HTTP_ADDR="+freeAddr(t)), "run")
	if code != 2 || !strings.Contains(out, "PAYMENT_HOOK_SQL differs from the one recorded for this contract") {
		t.Fatalf("replica with another hook exited %d, want 2:\n%s", code, out)
	}

	// Told to, it takes over as the group's hook: the first replica stops
	// writing and says why on /readyz.
	addrB := freeAddr(t)
	second := startProc(t, "replica-b", pollerEnv(r.dbURL, r.info.RPCURL, r.info, addrB, "PAYMENT_HOOK_SQL="+hookB, "ALLOW_HOOK_CHANGE=true"), "poller")
	waitFor(t, time.Minute, "the first replica refusing to write", func() bool {
		_, body := readyz(r.addr)
		return strings.Contains(body, "payment hook differs from the group's")
	})
	if c, _ := readyz(r.addr); c != http.StatusServiceUnavailable {
		t.Fatalf("first replica's /readyz = %d, want 503", c)
	}
	waitFor(t, time.Minute, "the second replica ready", func() bool { c, _ := readyz(addrB); return c == http.StatusOK })
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if c := p.wait(t, 15*time.Second); c != 0 {
			t.Fatalf("%s exited %d", p.name, c)
		}
	}
	// Every payment was credited exactly once, by hook A (the first
	// replica recorded them all before the change).
	var payments, credited, byA int
	if err := r.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM credited),
		(SELECT count(*) FROM credited c JOIN payments p ON p.id = c.payment_id WHERE c.hook = 'a')`).Scan(&payments, &credited, &byA); err != nil {
		t.Fatal(err)
	}
	if payments != 36 || credited != 36 || byA != 36 {
		t.Fatalf("%d payments, %d credited, %d by hook A; want 36 each", payments, credited, byA)
	}
}

// TestBackfillWithALongCursorID: the backfill's cursor id stays within the
// ledger's bound however long CURSOR_ID is, and the same arguments resume it.
func TestBackfillWithALongCursorID(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 0)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr, "CURSOR_ID="+strings.Repeat("group.", 33))
	for i := range 2 {
		out, code := runPoller(t, env, "backfill", "--from", "0", "--to", fmt.Sprint(to))
		if code != 0 {
			t.Fatalf("backfill %d exited %d:\n%s", i, code, out)
		}
		s := summaryOf(t, out)
		if !s.Complete || len(s.CursorID) > 200 || (i == 1 && !s.Resumed) {
			t.Fatalf("backfill %d summary = %+v", i, s)
		}
	}
	assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, to)
}

// TestVerifyFailsOverLikeTheLiveLoop: verify --to N picks its endpoint the
// way the live loop does: the first endpoint of RPC_URL being down does not
// stop it.
func TestVerifyFailsOverLikeTheLiveLoop(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 0)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	r.poller = startProc(t, "poller", pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr), "poller")
	r.finish(time.Minute)
	dead := "http://" + freeAddr(t)
	env := pollerEnv(r.dbURL, dead+","+r.info.RPCURL, r.info, r.addr)
	out, code := runPoller(t, env, "verify", "--from", "0", "--to", fmt.Sprint(to), "--json")
	if code != 0 || !strings.Contains(out, `"clean":true`) || !strings.Contains(out, `"chain_burns":36`) {
		t.Fatalf("verify with the first endpoint down exited %d:\n%s", code, out)
	}
}
