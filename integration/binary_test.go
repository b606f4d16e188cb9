package integration

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/tcpfault"
)

func runPoller(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	return runBinary(t, "poller", env, args...)
}

// runBinary runs binDir's bin with env added to the environment and
// returns its output and exit code.
func runBinary(t *testing.T, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, bin), args...)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	return "", -1
}

func TestMigrateSubcommand(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	for range 2 { // a second run finds nothing to do
		out, code := runPoller(t, []string{"DATABASE_URL=" + dbURL}, "migrate")
		if code != 0 {
			t.Fatalf("poller migrate exited %d:\n%s", code, out)
		}
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_tables WHERE tablename IN ('payments', 'block_cursors')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d ledger tables after migrate, want 2", n)
	}
}

func TestRefusesANodeOnAnotherChain(t *testing.T) {
	_, info := startDevchain(t, "--block-time", "200ms")
	dbURL := pgtest.NewDatabase(t)
	env := pollerEnv(dbURL, info.RPCURL, info, freeAddr(t), "CHAIN_ID=1")
	out, code := runPoller(t, env, "run")
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	if !strings.Contains(out, "CHAIN_ID is 1 but the node") || !strings.Contains(out, "1337") {
		t.Fatalf("output does not say what is wrong:\n%s", out)
	}
}

// TestProbesAndMetrics checks the HTTP surface of a running replica.
func TestProbesAndMetrics(t *testing.T) {
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "5")
	dbURL := pgtest.NewDatabase(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, addr), "poller")
	waitFor(t, time.Minute, "ready", func() bool { return httpStatus("http://"+addr+"/readyz") == 200 })
	waitFor(t, time.Minute, "a committed poll", func() bool {
		v, ok := scrape(addr, `burnpoller_polls_total{result="committed"}`)
		return ok && v > 0
	})

	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, check := range []string{"database", "migrations", "node", "poller"} {
		if ready.Checks[check] != "ok" {
			t.Errorf("readiness check %s = %q", check, ready.Checks[check])
		}
	}
	if code := httpStatus("http://" + addr + "/livez"); code != 200 {
		t.Errorf("/livez = %d", code)
	}

	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{
		"burnpoller_cursor_block", "burnpoller_target_block", "burnpoller_lag_blocks",
		"burnpoller_payments_inserted_total", "burnpoller_payments_duplicate_total",
		`burnpoller_polls_total{result="committed"}`, `burnpoller_polls_total{result="idle"}`,
		`burnpoller_polls_total{result="standby"}`, `burnpoller_polls_total{result="error"}`,
		"burnpoller_poll_duration_seconds_bucket", "burnpoller_lock_wait_seconds_bucket", "burnpoller_lock_held",
		`burnpoller_rpc_requests_total{method="eth_getLogs",result="ok"}`,
		`burnpoller_rpc_duration_seconds_bucket{method="eth_getLogs"`, "burnpoller_build_info{",
	} {
		if !strings.Contains(string(body), "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}

	// poller cursor show reports the cursor the replica left.
	env := pollerEnv(dbURL, info.RPCURL, info, addr)
	out, code := runPoller(t, env, "cursor", "show", "--json")
	if code != 0 {
		t.Fatalf("cursor show exited %d:\n%s", code, out)
	}
	var cursors []struct {
		ID    string `json:"id"`
		Block int64  `json:"last_processed_block"`
		Hash  string `json:"last_processed_hash"`
	}
	if err := json.Unmarshal([]byte(out), &cursors); err != nil {
		t.Fatalf("cursor show printed %q: %v", out, err)
	}
	want := "1337:" + strings.ToLower(info.BurnContract.Hex())
	if len(cursors) != 1 || cursors[0].ID != want || cursors[0].Block < 0 || len(cursors[0].Hash) != 66 {
		t.Fatalf("cursor show = %+v, want %s with a block and hash", cursors, want)
	}
}

// TestNewHeadsWakeThePoller: with a long POLL_INTERVAL, a replica with
// RPC_WS_URL still follows the chain, because each new head ends its wait;
// with the WebSocket unreachable it says so and falls back to polling.
func TestNewHeadsWakeThePoller(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "5")
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=1h", "RPC_WS_URL="+info.WSURL), "poller")
	waitFor(t, time.Minute, "the subscription up", func() bool {
		v, ok := scrape(addr, "burnpoller_head_subscription_up")
		return ok && v == 1
	})
	waitFor(t, time.Minute, "a first range", func() bool { return cursorBlock(t, pool) >= 0 })
	first := cursorBlock(t, pool)
	// Finalized blocks come every 32 blocks (3.2s); with an hour's
	// POLL_INTERVAL only the heads can bring the cursor along.
	waitFor(t, 2*time.Minute, "the cursor to follow new heads", func() bool { return cursorBlock(t, pool) >= first+64 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// No WebSocket: the metric says so and polling carries on.
	addr2 := freeAddr(t)
	p2 := startProc(t, "poller-nows", pollerEnv(dbURL, info.RPCURL, info, addr2, "POLL_INTERVAL=200ms", "RPC_WS_URL=ws://"+freeAddr(t)), "poller")
	at := cursorBlock(t, pool)
	waitFor(t, 2*time.Minute, "polling without the subscription", func() bool { return cursorBlock(t, pool) >= at+64 })
	if v, _ := scrape(addr2, "burnpoller_head_subscription_up"); v != 0 {
		t.Fatalf("burnpoller_head_subscription_up = %v with nothing listening", v)
	}
	if !strings.Contains(p2.out.String(), "newHeads subscription down") {
		t.Fatal("no log line says the subscription is down")
	}
	p2.signal(syscall.SIGTERM)
	if code := p2.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d without the WebSocket", code)
	}
}

// TestNewHeadsSubscriptionDropsMidRun: the WebSocket connection is cut while
// the replica runs and the network to it stays down. The replica says so,
// keeps following the chain by polling, and resubscribes once the network
// is back.
func TestNewHeadsSubscriptionDropsMidRun(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "5")
	ws, err := tcpfault.Start(strings.TrimPrefix(info.WSURL, "ws://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() })
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=500ms", "RPC_WS_URL=ws://"+ws.Addr()), "poller")
	up := func() float64 { v, _ := scrape(addr, "burnpoller_head_subscription_up"); return v }
	waitFor(t, time.Minute, "the subscription up", func() bool { return up() == 1 })
	// Following the chain (finalized every 32 blocks), not catching up.
	waitFor(t, time.Minute, "the cursor following the chain", func() bool { return cursorBlock(t, pool) >= 96 })

	// Cut the connection; new ones hang, as across a broken network.
	ws.Partition(true)
	ws.DropAll()
	waitFor(t, time.Minute, "the subscription reported down", func() bool { return up() == 0 })
	waitFor(t, 30*time.Second, "a log line saying so", func() bool {
		return strings.Contains(p.out.String(), "newHeads subscription down; polling until it is back")
	})
	at := cursorBlock(t, pool)
	cut := time.Now()
	waitFor(t, 2*time.Minute, "polling to carry the cursor along", func() bool { return cursorBlock(t, pool) >= at+64 })
	t.Logf("cursor %d -> %d in %s with the subscription down", at, cursorBlock(t, pool), time.Since(cut))
	if v := up(); v != 0 {
		t.Fatalf("burnpoller_head_subscription_up = %v while the network to the WebSocket is down", v)
	}

	ws.Partition(false)
	waitFor(t, 2*time.Minute, "the subscription back", func() bool { return up() == 1 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, pool)))
}
