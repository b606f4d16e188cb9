package integration

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/internal/tcpfault"
)

// soakFor is the soak flag: go test ./integration -run TestChaos -args -soak 30m.
var soakFor = flag.Duration("soak", 0, "inject chaos faults for this long instead of 45s (a soak)")

// chaosDuration is how long faults are injected: 45 s, or the -soak flag, or
// BURNPOLLER_CHAOS_DURATION (a Go duration), which turn the suite into a
// soak.
func chaosDuration(t *testing.T) time.Duration {
	t.Helper()
	if *soakFor > 0 {
		return *soakFor
	}
	if v := os.Getenv("BURNPOLLER_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BURNPOLLER_CHAOS_DURATION: %v", err)
		}
		return d
	}
	return 45 * time.Second
}

// chaosCluster is a throwaway Postgres the test may restart, with the
// ledger migrated.
type chaosCluster struct {
	cluster *pgtest.Cluster
	dbURL   url.URL
	pool    *pgxpool.Pool
}

func startChaosCluster(t *testing.T) *chaosCluster {
	t.Helper()
	cluster := pgtest.NewCluster(t)
	dbURL := *cluster.URL()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE ledger"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	dbURL.Path = "/ledger"
	mconn, err := pgx.Connect(ctx, dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Migrate(ctx, mconn); err != nil {
		t.Fatal(err)
	}
	mconn.Close(ctx)
	pool, err := pgxpool.New(ctx, dbURL.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &chaosCluster{cluster: cluster, dbURL: dbURL, pool: pool}
}

// via returns the cluster's URL through a TCP fault proxy.
func (c *chaosCluster) via(p *tcpfault.Proxy) string {
	u := c.dbURL
	u.Host = p.Addr()
	return u.String()
}

// replica is one poller process with its own database and node proxies.
type replica struct {
	name    string
	env     []string
	addr    string
	db      *tcpfault.Proxy
	rpc     *rpcfault.Proxy
	mu      sync.Mutex
	proc    *proc
	gen     int
	stopped bool // SIGSTOPped
}

func (r *replica) current() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	r.proc = startProc(t, fmt.Sprintf("%s.%d", r.name, r.gen), r.env, "poller")
	r.stopped = false
}

// fault is one kind of fault a chaos test injects.
type fault struct {
	name string
	do   func()
}

// replicaFaults are the faults of the replicas themselves: killed and
// started again, frozen past TX_TIMEOUT (the replica frozen picks, named
// whom), their database connections dropped, or cut off from the database
// past TX_TIMEOUT.
func replicaFaults(t *testing.T, replicas []*replica, rng *rand.Rand, frozen func() *replica, whom string, txTimeout time.Duration) []fault {
	t.Helper()
	anyOne := func() *replica { return replicas[rng.IntN(len(replicas))] }
	return []fault{
		{"sigkill a replica and restart it", func() {
			r := anyOne()
			p := r.current()
			p.signal(syscall.SIGKILL)
			<-p.done
			time.Sleep(500 * time.Millisecond)
			r.start(t)
		}},
		{"sigstop " + whom + " past TX_TIMEOUT, then sigcont", func() {
			p := frozen().current()
			p.signal(syscall.SIGSTOP)
			time.Sleep(txTimeout + 1500*time.Millisecond)
			p.signal(syscall.SIGCONT)
		}},
		{"drop a replica's database connections", func() { anyOne().db.DropAll() }},
		{"partition a replica from the database past TX_TIMEOUT", func() {
			r := anyOne()
			r.db.Partition(true)
			time.Sleep(txTimeout + time.Second)
			r.db.Partition(false)
		}},
	}
}

// invariants watches the ledger while faults run: the cursor never goes
// back, and no payment lies beyond the cursor.
type invariants struct {
	mu         sync.Mutex
	checks     int
	violations []string
	last       int64
}

// watch checks until ctx ends; iv.last starts at -2 (no cursor yet).
func (iv *invariants) watch(ctx context.Context, pool *pgxpool.Pool, cursorID string) {
	iv.watchGroup(ctx, pool, cursorID, 0)
}

// watchGroup is watch for one group of several: its cursor, and the
// payments of its chain (every payment for chainID 0).
func (iv *invariants) watchGroup(ctx context.Context, pool *pgxpool.Pool, cursorID string, chainID uint64) {
	for ctx.Err() == nil {
		var cursor, maxBlock int64
		// One statement, one snapshot.
		err := pool.QueryRow(ctx, `SELECT
			coalesce((SELECT last_processed_block FROM block_cursors WHERE id = $1), -2),
			coalesce((SELECT max(block_number) FROM payments WHERE $2 = 0 OR chain_id = $2), -1)`, cursorID, int64(chainID)).Scan(&cursor, &maxBlock)
		if err == nil {
			iv.mu.Lock()
			iv.checks++
			if cursor < iv.last {
				iv.violations = append(iv.violations, fmt.Sprintf("cursor went back from %d to %d", iv.last, cursor))
			}
			if maxBlock > cursor {
				iv.violations = append(iv.violations, fmt.Sprintf("payment in block %d beyond the cursor %d", maxBlock, cursor))
			}
			iv.last = max(iv.last, cursor)
			iv.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// TestChaos runs three replicas under continuous burn traffic while killing,
// freezing and partitioning them, dropping their database connections,
// restarting Postgres and making their nodes throttle, fail, hang and lag.
// During and after: the ledger equals the chain's burns exactly, the cursor
// never goes back and committed ranges never overlap, no payment lies beyond
// the cursor; afterwards every replica is ready, lag returns to zero within a
// bound, goroutines are bounded and no replica is stuck.
func TestChaos(t *testing.T) {
	duration := chaosDuration(t)
	pg := startChaosCluster(t)
	auditCursor(t, pg.pool)
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "12", "--payers", "6")
	cursorID := "1337:" + strings.ToLower(info.BurnContract.Hex())

	const txTimeout = 3 * time.Second
	// Every event goes to a real HTTP receiver, which faults too.
	const hookSecret = "whsec-chaos-0123456789"
	hooks := startReceiver(t, hookSecret)
	var replicas []*replica
	for i := range 3 {
		db, err := tcpfault.Start(fmt.Sprintf("127.0.0.1:%d", pg.cluster.Port()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		rpcp, err := rpcfault.Start(info.RPCURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rpcp.Close() })
		r := &replica{name: fmt.Sprintf("replica-%d", i), addr: freeAddr(t), db: db, rpc: rpcp}
		r.env = pollerEnv(pg.via(db), rpcp.URL, info, r.addr,
			"MIGRATE=false", "MAX_BLOCK_RANGE=8", "LOCK_WAIT=1s", "TX_TIMEOUT="+txTimeout.String(),
			"RPC_TIMEOUT=1s", "SHUTDOWN_TIMEOUT=5s", "RESCAN_INTERVAL=5s",
			"WEBHOOK_URL="+hooks.URL(), "WEBHOOK_SECRET="+hookSecret, "WEBHOOK_EVENTS=seen,retracted,confirmed",
			"WEBHOOK_TIMEOUT=1s")
		r.start(t)
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		waitFor(t, time.Minute, r.name+" ready", func() bool { c, _ := readyz(r.addr); return c == 200 })
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	iv := &invariants{last: -2}
	var watching sync.WaitGroup
	watching.Go(func() { iv.watch(ctx, pg.pool, cursorID) })

	// Faults, chosen at random for the duration.
	counts := map[string]int{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	holder := func() *replica {
		for _, r := range replicas {
			if v, ok := scrape(r.addr, "burnpoller_lock_held"); ok && v == 1 {
				return r
			}
		}
		return replicas[rng.IntN(len(replicas))]
	}
	faults := append(replicaFaults(t, replicas, rng, holder, "the lock holder", txTimeout), []fault{
		{"database latency", func() {
			r := replicas[rng.IntN(3)]
			r.db.SetLatency(40 * time.Millisecond)
			time.Sleep(3 * time.Second)
			r.db.SetLatency(0)
		}},
		{"restart postgres", func() {
			pg.cluster.Stop()
			time.Sleep(time.Second)
			if err := pg.cluster.Start(); err != nil {
				t.Errorf("restarting postgres: %v", err)
			}
		}},
		{"node throttles with Retry-After", func() {
			replicas[rng.IntN(3)].rpc.Set(func(f *rpcfault.Faults) { f.Throttle, f.RetryAfter = 3, time.Second })
		}},
		{"node answers 500", func() { replicas[rng.IntN(3)].rpc.Set(func(f *rpcfault.Faults) { f.ServerErrors = 4 }) }},
		{"node hangs past the timeout", func() { replicas[rng.IntN(3)].rpc.Set(func(f *rpcfault.Faults) { f.Hang = 2 }) }},
		{"webhook receiver answers 500", func() {
			hooks.setMode("500")
			time.Sleep(2 * time.Second)
			hooks.setMode("")
		}},
		{"webhook receiver hangs past WEBHOOK_TIMEOUT", func() {
			hooks.setMode("hang")
			time.Sleep(2 * time.Second)
			hooks.setMode("")
		}},
		{"webhook receiver drops connections", func() {
			hooks.setMode("drop")
			time.Sleep(2 * time.Second)
			hooks.setMode("")
		}},
		{"node lags behind", func() {
			r := replicas[rng.IntN(3)]
			at := uint64(max(iv.lastCursor()-20, 0))
			r.rpc.Set(func(f *rpcfault.Faults) { f.LagAt = &at })
			time.Sleep(3 * time.Second)
			r.rpc.Set(func(f *rpcfault.Faults) { f.LagAt = nil })
		}},
	}...)
	// Rounds of every fault in a random order, until the time is up.
	start := time.Now()
	for time.Since(start) < duration {
		for _, i := range rng.Perm(len(faults)) {
			if time.Since(start) >= duration {
				break
			}
			faults[i].do()
			counts[faults[i].name]++
			time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		}
	}
	faultsEnd := time.Now()

	// Faults stop: every replica runs, nothing is stopped or injected.
	for _, r := range replicas {
		r.current().signal(syscall.SIGCONT)
		r.db.Partition(false)
		r.db.SetLatency(0)
		r.rpc.Set(func(f *rpcfault.Faults) { *f = rpcfault.Faults{} })
	}
	chain := finalizedBlock(t, info.RPCURL)
	for _, r := range replicas {
		waitFor(t, 2*time.Minute, r.name+" ready after the faults", func() bool { c, _ := readyz(r.addr); return c == 200 })
	}
	// Measured for the summary; the wait's deadline is a guard, not a bound
	// the test asserts.
	waitFor(t, 2*time.Minute, "lag back to zero", func() bool { return iv.lastCursor() >= int64(chain) })
	recovery := time.Since(faultsEnd)

	// No replica stuck: each keeps polling.
	polls := func(r *replica) float64 {
		var sum float64
		for _, res := range []string{"committed", "idle", "standby", "error"} {
			v, _ := scrape(r.addr, fmt.Sprintf(`burnpoller_polls_total{result=%q}`, res))
			sum += v
		}
		return sum
	}
	before := map[*replica]float64{}
	for _, r := range replicas {
		before[r] = polls(r)
	}
	goroutines := map[string]float64{}
	for _, r := range replicas {
		// Within the longest back-off (30s) every loop comes round again.
		waitFor(t, 40*time.Second, r.name+" polling", func() bool { return polls(r) > before[r] })
		g, _ := scrape(r.addr, "go_goroutines")
		goroutines[r.name] = g
		if g == 0 || g > 60 {
			t.Errorf("%s runs %v goroutines", r.name, g)
		}
		if c := httpStatus("http://" + r.addr + "/livez"); c != 200 {
			t.Errorf("%s /livez = %d", r.name, c)
		}
	}

	cancel()
	watching.Wait()
	for _, r := range replicas {
		p := r.current()
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}

	var cursor int64
	if err := pg.pool.QueryRow(context.Background(), `SELECT last_processed_block FROM block_cursors WHERE id = $1`, cursorID).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	rows := assertLedgerEqualsChain(t, pg.pool, info.RPCURL, info.BurnContract, uint64(cursor))
	// The event log matches the ledger, and every event reached the
	// receiver at least once, signed, with a stable id and body.
	evs := auditEvents(t, pg.pool, info.ChainID)
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.id
	}
	for _, r := range replicas[:1] {
		r.start(t) // one replica delivers what is left after the faults
	}
	// Deliveries a killed replica had claimed wait out their lease
	// (WEBHOOK_TIMEOUT + 3 s); retried ones their back-off. The runbook's
	// "send at once" makes them due now.
	if _, err := pg.pool.Exec(context.Background(), `UPDATE webhook_deliveries SET next_attempt_at = now()
		WHERE delivered_at IS NULL AND dead_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(hooks.missing(ids)) > 0 {
		if time.Now().After(deadline) {
			missing := hooks.missing(ids)
			rows, _ := pg.pool.Query(context.Background(), `SELECT e.seq, e.event_id, d.endpoint IS NOT NULL, coalesce(d.attempts, -1),
				coalesce(d.last_error, ''), d.delivered_at IS NOT NULL, d.next_attempt_at::text
				FROM payment_events e LEFT JOIN webhook_deliveries d USING (seq) WHERE e.event_id = ANY($1) LIMIT 10`, missing)
			for rows != nil && rows.Next() {
				var (
					seq               int64
					id, lastErr, next string
					queued, delivered bool
					attempts          int
				)
				_ = rows.Scan(&seq, &id, &queued, &attempts, &lastErr, &delivered, &next)
				t.Logf("undelivered: seq %d %s queued %v attempts %d last error %q delivered %v next %s", seq, id, queued, attempts, lastErr, delivered, next)
			}
			var enq, last int64
			_ = pg.pool.QueryRow(context.Background(), `SELECT enqueued_seq, (SELECT last_seq FROM payment_event_seq) FROM webhook_endpoints`).Scan(&enq, &last)
			t.Fatalf("%d of %d events not delivered after the faults (enqueued to seq %d of %d)", len(missing), len(ids), enq, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range hooks.problems() {
		t.Error("webhook receiver:", p)
	}
	{
		// A replica restarted by the last fault may not have installed its
		// signal handling yet: SIGTERM then kills it outright.
		p := replicas[0].current()
		waitFor(t, time.Minute, p.name+" started", func() bool { return strings.Contains(p.out.String(), "burnpoller starting") })
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}
	prev := int64(-1)
	moves := 0
	for _, m := range committedRanges(t, pg.pool) {
		if m.Old != prev || m.New <= m.Old {
			t.Fatalf("cursor move %d -> %d after %d: ranges overlap, skip or go backwards", m.Old, m.New, prev)
		}
		prev = m.New
		moves++
	}
	iv.mu.Lock()
	defer iv.mu.Unlock()
	for _, v := range iv.violations {
		t.Error("during the faults:", v)
	}
	perTx := map[string]int{}
	for _, r := range rows {
		perTx[r.TxHash]++
	}
	twice := 0
	for _, n := range perTx {
		if n == 2 {
			twice++
		}
	}
	if len(rows) < 200 || twice == 0 {
		t.Errorf("the run recorded %d burns (%d two-burn transactions); too little traffic to mean much", len(rows), twice)
	}

	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	var injected []string
	total := 0
	for _, n := range names {
		injected = append(injected, fmt.Sprintf("%s: %d", n, counts[n]))
		total += counts[n]
	}
	summary, _ := json.Marshal(map[string]any{
		"faults_seconds": duration.Seconds(), "faults_injected": total, "by_kind": injected,
		"burns": len(rows), "two_burn_txs": twice, "committed_ranges": moves, "cursor": cursor,
		"invariant_checks": iv.checks, "violations": len(iv.violations), "events": len(evs),
		"recovery_seconds": recovery.Seconds(), "goroutines_after": goroutines,
	})
	t.Logf("chaos summary: %s", summary)
}

// frozenSession is the poller session of this database that has sat idle
// inside a transaction for 400 ms or more, a holder stopped between
// statements, with the moment its idle period began: Postgres ends it
// (idle_in_transaction_session_timeout) TX_TIMEOUT after that. It must
// hold the cursor row (pgrowlocks): a replica stopped between its BEGIN and
// the cursor lock is idle in a transaction that holds nothing, and a
// standby waiting on the lock is not idle; ok is false when no session is.
func frozenSession(t *testing.T, pool *pgxpool.Pool) (pid int32, idleSince time.Time, ok bool) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT pid, state_change FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = '`+ledgerApp+`'
		AND state = 'idle in transaction' AND state_change < now() - interval '400 ms'
		AND pid IN (SELECT unnest(pids) FROM pgrowlocks('block_cursors'))`).Scan(&pid, &idleSince)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, time.Time{}, false
	case err != nil:
		t.Fatal(err)
	}
	return pid, idleSince, true
}

func (iv *invariants) lastCursor() int64 {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	return iv.last
}

// TestFrozenHolderIsReplaced freezes the lock holder while its eth_getLogs
// is in flight. A standby takes over once Postgres ends the frozen session
// (TX_TIMEOUT); when the frozen replica resumes, its transaction fails, it
// rolls back, says so, and rejoins as standby. Nothing is doubled or lost.
func TestFrozenHolderIsReplaced(t *testing.T) {
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "10")
	pool, dbURL := pgtest.NewPool(t)
	auditCursor(t, pool)
	if _, err := pool.Exec(context.Background(), `CREATE EXTENSION IF NOT EXISTS pgrowlocks`); err != nil {
		t.Fatal(err)
	}
	const txTimeout = 3 * time.Second
	type rep struct {
		addr string
		rpc  *rpcfault.Proxy
		p    *proc
	}
	var reps []*rep
	for i := range 2 {
		rpcp, err := rpcfault.Start(info.RPCURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rpcp.Close() })
		r := &rep{addr: freeAddr(t), rpc: rpcp}
		r.p = startProc(t, fmt.Sprintf("replica-%d", i), pollerEnv(dbURL, rpcp.URL, info, r.addr,
			"LOCK_WAIT=1s", "TX_TIMEOUT="+txTimeout.String(), "RPC_TIMEOUT=2s", "MAX_BLOCK_RANGE=8", "RESCAN_DEPTH=0"), "poller")
		reps = append(reps, r)
	}
	for _, r := range reps {
		waitFor(t, time.Minute, "ready", func() bool { c, _ := readyz(r.addr); return c == 200 })
	}
	waitFor(t, time.Minute, "some progress", func() bool { return cursorBlock(t, pool) > 40 })

	// Slow logs, so that the holder is caught with eth_getLogs in flight.
	for _, r := range reps {
		r.rpc.Set(func(f *rpcfault.Faults) { f.Delay = 1200 * time.Millisecond })
	}
	var (
		frozen    *rep
		frozenAt  int64
		stoppedAt time.Time
		frozenPID int32
		idleSince time.Time
		ok        bool
	)
	for attempt := 1; ; attempt++ {
		delayed := make([]int, len(reps))
		for i, r := range reps {
			delayed[i] = r.rpc.Stats().Delayed
		}
		waitFor(t, time.Minute, "a holder inside eth_getLogs", func() bool {
			for i, r := range reps {
				if v, _ := scrape(r.addr, "burnpoller_lock_held"); v == 1 && r.rpc.Stats().Delayed > delayed[i] {
					frozen = reps[i]
					return true
				}
			}
			return false
		})
		time.Sleep(300 * time.Millisecond) // well inside the delayed eth_getLogs
		frozenAt = cursorBlock(t, pool)
		frozen.p.signal(syscall.SIGSTOP)
		stoppedAt = time.Now()
		// Frozen with the lock: its session sits idle in its transaction.
		// Otherwise the request seen was not the holder's eth_getLogs, or it
		// ended before the freeze: thaw it and try again.
		time.Sleep(500 * time.Millisecond)
		if frozenPID, idleSince, ok = frozenSession(t, pool); ok {
			break
		}
		frozen.p.signal(syscall.SIGCONT)
		if attempt == 5 {
			t.Fatal("could not freeze the holder inside its transaction in 5 attempts")
		}
	}
	for _, r := range reps {
		r.rpc.Set(func(f *rpcfault.Faults) { f.Delay = 0 })
	}

	// The standby commits once Postgres has ended the frozen session.
	waitFor(t, 30*time.Second, "the standby to take over", func() bool { return cursorBlock(t, pool) > frozenAt })
	takeover := time.Since(stoppedAt)
	// Postgres ends the frozen session TX_TIMEOUT after its idle period
	// began, not sooner: only then is the cursor row free, so the
	// standby's first cursor update comes after that (both times are the
	// database's clock). How much later is measured, not asserted.
	waitFor(t, 5*time.Second, "Postgres to have ended the frozen session", func() bool {
		return pollerSessions(t, pool, `pid = $1`, frozenPID) == 0
	})
	moved := false
	for _, m := range committedRanges(t, pool) {
		if !m.At.After(idleSince) {
			continue
		}
		moved = true
		if ended := idleSince.Add(txTimeout); m.At.Before(ended) {
			t.Fatalf("the cursor moved %d -> %d at %s, before Postgres could end the frozen session (idle since %s, TX_TIMEOUT %s)",
				m.Old, m.New, m.At.Format(time.StampMicro), idleSince.Format(time.StampMicro), txTimeout)
		}
	}
	if !moved {
		t.Fatal("no cursor move recorded after the holder froze")
	}
	time.Sleep(txTimeout) // frozen well past its transaction's end
	frozen.p.signal(syscall.SIGCONT)

	// The frozen transaction was a poll or, at the target, a head tracking
	// pass: either way it fails and says so.
	waitFor(t, 30*time.Second, "the resumed replica to report its failed transaction", func() bool {
		out := frozen.p.out.String()
		return strings.Contains(out, "poll failed; rolled back, retrying") || strings.Contains(out, "head tracking failed")
	})
	waitFor(t, time.Minute, "the resumed replica ready again", func() bool { c, _ := readyz(frozen.addr); return c == 200 })
	waitFor(t, time.Minute, "the resumed replica polling again", func() bool {
		v, _ := scrape(frozen.addr, `burnpoller_polls_total{result="standby"}`)
		w, _ := scrape(frozen.addr, `burnpoller_polls_total{result="idle"}`)
		return v+w > 0
	})
	time.Sleep(2 * time.Second)
	for _, r := range reps {
		r.p.signal(syscall.SIGTERM)
		if code := r.p.wait(t, 15*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	cursor := cursorBlock(t, pool)
	assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursor))
	prev := int64(-1)
	for _, m := range committedRanges(t, pool) {
		if m.Old != prev || m.New <= m.Old {
			t.Fatalf("cursor move %d -> %d after %d", m.Old, m.New, prev)
		}
		prev = m.New
	}
	t.Logf("frozen-holder summary: {\"tx_timeout_seconds\": %v, \"takeover_seconds\": %.2f}", txTimeout.Seconds(), takeover.Seconds())
}
