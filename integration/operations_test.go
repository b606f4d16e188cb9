package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/payments"
)

// finalizedBlock reads the node's finalized block.
func finalizedBlock(t *testing.T, rpcURL string) uint64 {
	t.Helper()
	c, err := ethclient.Dial(rpcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h, err := c.HeaderByNumber(context.Background(), big.NewInt(int64(rpc.FinalizedBlockNumber)))
	if err != nil {
		t.Fatal(err)
	}
	return h.Number.Uint64()
}

// waitFinalized waits until the node has finalized block n and returns the
// finalized block.
func waitFinalized(t *testing.T, rpcURL string, n uint64) uint64 {
	t.Helper()
	var f uint64
	waitFor(t, time.Minute, fmt.Sprintf("block %d finalized", n), func() bool {
		f = finalizedBlock(t, rpcURL)
		return f >= n
	})
	return f
}

type backfillSummary struct {
	CursorID   string `json:"cursor_id"`
	To         int64  `json:"to"`
	Done       int64  `json:"blocks_done"`
	Total      int64  `json:"blocks_total"`
	Inserted   int64  `json:"inserted"`
	Duplicates int64  `json:"duplicates"`
	Complete   bool   `json:"complete"`
	Resumed    bool   `json:"resumed"`
	Error      string `json:"error"`
}

// summaryOf finds the JSON summary line in a backfill's output.
func summaryOf(t *testing.T, out string) backfillSummary {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		var s backfillSummary
		// The summary, not a progress log line: it has cursor_id and complete.
		if strings.Contains(line, `"cursor_id"`) && strings.Contains(line, `"complete"`) && json.Unmarshal([]byte(line), &s) == nil {
			return s
		}
	}
	t.Fatalf("no JSON summary in:\n%s", out)
	return backfillSummary{}
}

func backfillCursor(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT last_processed_block FROM block_cursors WHERE id LIKE 'backfill:%'`).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return -2
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackfillThatCannotFinishExitsOne: a node whose every reply with logs
// is inconsistent makes each chunk with burns fail; after its attempts the
// backfill gives up with exit 1 and a summary that says it is incomplete,
// having committed only what it verified.
func TestBackfillThatCannotFinishExitsOne(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.CorruptHashes = 1 << 30 })
	env := pollerEnv(r.dbURL, r.proxies[0].URL, r.info, r.addr)
	p := startProc(t, "backfill", env, "poller", "backfill", "--from", "0", "--to", fmt.Sprint(to))
	if code := p.wait(t, 3*time.Minute); code != 1 {
		t.Fatalf("backfill exited %d, want 1", code)
	}
	s := summaryOf(t, p.out.String())
	if s.Complete || s.Done >= s.Total || !strings.Contains(s.Error, "giving up after 8 failed attempts") {
		t.Fatalf("summary = %+v", s)
	}
	if r.proxies[0].Stats().CorruptedLogs == 0 {
		t.Fatal("no reply was corrupted; the test proves nothing")
	}
	// Every reply carrying logs was corrupted, so nothing was credited; the
	// cursor moved only over blocks without burns.
	if n := countPayments(t, r.pool); n != 0 {
		t.Fatalf("%d payments recorded from corrupted replies", n)
	}
	if c := backfillCursor(t, r.pool); c >= 0 {
		assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(c))
	}
}

func TestBackfillKilledResumesWithoutGapOrDouble(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	// A slow node, so that the backfill is caught in the middle.
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.Delay = 150 * time.Millisecond })
	env := pollerEnv(r.dbURL, r.proxies[0].URL, r.info, r.addr)
	args := []string{"backfill", "--from", "0", "--to", fmt.Sprint(to), "--chunk", "2"}

	first := startProc(t, "backfill-1", env, "poller", args...)
	waitFor(t, time.Minute, "the backfill under way", func() bool { return backfillCursor(t, r.pool) >= 10 })
	first.signal(syscall.SIGKILL)
	first.wait(t, time.Minute)
	killedAt := backfillCursor(t, r.pool)
	if killedAt >= int64(to) {
		t.Fatalf("the backfill finished (%d) before it was killed; the test proves nothing", killedAt)
	}

	// SIGINT: the current chunk commits or rolls back, then exit 130.
	second := startProc(t, "backfill-2", env, "poller", args...)
	waitFor(t, time.Minute, "the resumed backfill under way", func() bool { return backfillCursor(t, r.pool) >= killedAt+4 })
	second.signal(syscall.SIGINT)
	if code := second.wait(t, time.Minute); code != 130 {
		t.Fatalf("backfill exited %d after SIGINT, want 130", code)
	}
	if s := summaryOf(t, second.out.String()); s.Complete || !s.Resumed {
		t.Fatalf("summary after SIGINT = %+v", s)
	}

	r.proxies[0].Set(func(f *rpcfault.Faults) { f.Delay = 0 })
	out, code := runPoller(t, env, args...)
	if code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	}
	s := summaryOf(t, out)
	if !s.Complete || !s.Resumed || s.Total != int64(to)+1 || s.Done != s.Total || s.Duplicates != 0 {
		t.Fatalf("final summary = %+v", s)
	}
	rows := assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, to)
	if len(rows) != 36 {
		t.Fatalf("%d burns, want 36", len(rows))
	}
	// The live cursor was never touched.
	if c := cursorBlock(t, r.pool); c != -2 {
		t.Fatalf("live cursor exists at %d after a backfill alone", c)
	}
}

func TestBackfillBesideLiveReplicas(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	auditCursor(t, r.pool)
	var live []*proc
	for i := range 2 {
		env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, freeAddr(t), "MAX_BLOCK_RANGE=3", "RESCAN_DEPTH=0")
		live = append(live, startProc(t, fmt.Sprintf("live-%d", i), env, "poller"))
	}
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)
	out, code := runPoller(t, env, "backfill", "--from", "0", "--to", fmt.Sprint(to), "--chunk", "2")
	if code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	}
	waitFor(t, time.Minute, "the live cursor past the backfill", func() bool { return cursorBlock(t, r.pool) >= int64(to) })
	for _, p := range live {
		p.signal(syscall.SIGTERM)
		if c := p.wait(t, time.Minute); c != 0 {
			t.Fatalf("live replica exited %d", c)
		}
	}
	assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, to)
	for _, m := range committedRanges(t, r.pool) {
		if m.New <= m.Old {
			t.Fatalf("a cursor moved backwards: %d -> %d", m.Old, m.New)
		}
	}
	s := summaryOf(t, out)
	if s.Inserted+s.Duplicates != 36 {
		t.Fatalf("backfill saw %d new + %d duplicates, want 36 in all", s.Inserted, s.Duplicates)
	}
}

func TestVerifyFindsEveryKindOfDiscrepancy(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	to := waitFinalized(t, r.info.RPCURL, r.lastBurn)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)
	if out, code := runPoller(t, env, "backfill", "--from", "0", "--to", fmt.Sprint(to)); code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	}
	verify := func() (map[string]any, int) {
		out, code := runPoller(t, env, "verify", "--from", "0", "--to", fmt.Sprint(to), "--json")
		var rep map[string]any
		if err := json.Unmarshal([]byte(lastLine(out)), &rep); err != nil {
			t.Fatalf("verify printed %q: %v", out, err)
		}
		return rep, code
	}
	if rep, code := verify(); code != 0 || rep["clean"] != true || rep["chain_burns"] != float64(36) {
		t.Fatalf("verify of a good ledger: exit %d, %v", code, rep)
	}

	ctx := context.Background()
	var ids []int64
	rows, err := r.pool.Query(ctx, `SELECT id FROM payments ORDER BY id LIMIT 3`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	for _, sql := range []string{
		fmt.Sprintf(`DELETE FROM payments WHERE id = %d`, ids[0]),
		fmt.Sprintf(`UPDATE payments SET amount = amount + 1, payer = '0x%040d' WHERE id = %d`, 1, ids[1]),
		fmt.Sprintf(`UPDATE payments SET block_hash = '0x%064d', digest = '0x%064d' WHERE id = %d`, 2, 3, ids[2]),
		fmt.Sprintf(`INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
			SELECT chain_id, contract, '0x%064d', 0, block_number, block_hash, payer, digest, 1, burned_at FROM payments WHERE id = %d`, 9, ids[1]),
	} {
		if _, err := r.pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var before int
	_ = r.pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&before)
	rep, code := verify()
	if code != 1 || rep["clean"] != false || rep["missing"] != float64(1) || rep["extra"] != float64(1) || rep["mismatched"] != float64(2) {
		t.Fatalf("verify of a damaged ledger: exit %d, %v", code, rep)
	}
	var fields []string
	for _, d := range rep["discrepancies"].([]any) {
		if f, ok := d.(map[string]any)["fields"]; ok {
			for _, x := range f.([]any) {
				fields = append(fields, x.(string))
			}
		}
	}
	slices.Sort(fields)
	if fmt.Sprint(fields) != "[amount block_hash digest payer]" {
		t.Fatalf("mismatched fields = %v", fields)
	}
	// Human-readable by default, and verify never wrote.
	out, code := runPoller(t, env, "verify", "--from", "0", "--to", fmt.Sprint(to))
	if code != 1 || !strings.Contains(out, "DISCREPANCIES") || !strings.Contains(out, "missing: 1") {
		t.Fatalf("verify report (exit %d):\n%s", code, out)
	}
	var after int
	_ = r.pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&after)
	if after != before {
		t.Fatalf("verify changed the table: %d rows, was %d", after, before)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestRunUntilFinalizedExits(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	waitFinalized(t, r.info.RPCURL, r.lastBurn)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)
	out, code := runPoller(t, env, "run", "--until-finalized")
	if code != 0 {
		t.Fatalf("run --until-finalized exited %d:\n%s", code, out)
	}
	cursor := cursorBlock(t, r.pool)
	if cursor < int64(r.lastBurn) {
		t.Fatalf("cursor %d stops short of the last burn %d", cursor, r.lastBurn)
	}
	assertLedgerEqualsChain(t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(cursor))
}

// notifications collects what a LISTENer receives.
type notifications struct {
	mu      sync.Mutex
	got     []payments.Notification
	markers []string // payloads sync sent
	done    chan struct{}
}

func listenPayments(t *testing.T, dbURL string) *notifications {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+payments.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	n := &notifications{done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for {
			note, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			var p payments.Notification
			n.mu.Lock()
			switch {
			case strings.HasPrefix(note.Payload, markerPrefix):
				n.markers = append(n.markers, note.Payload)
			case json.Unmarshal([]byte(note.Payload), &p) == nil:
				n.got = append(n.got, p)
			}
			n.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-n.done
		conn.Close(context.Background())
	})
	return n
}

func (n *notifications) all() []payments.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// markerPrefix starts the payloads sync sends.
const markerPrefix = "test-marker-"

// sync sends a marker on the payments channel through pool, waits until the
// listener has it and returns every notification received. Notifications
// reach a listener in commit order, so by then it has received those of
// every transaction committed before sync was called.
func (n *notifications) sync(t *testing.T, pool *pgxpool.Pool) []payments.Notification {
	t.Helper()
	marker := fmt.Sprint(markerPrefix, time.Now().UnixNano())
	if _, err := pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, payments.NotifyChannel, marker); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the listener to receive the marker", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return slices.Contains(n.markers, marker)
	})
	return n.all()
}

// TestNotifyAndHookExactlyOnce runs two replicas with a balance-credit hook
// and a LISTENer, kills one mid-run, forces re-processing (a cursor reset
// and an overlapping backfill, both all duplicates), and requires exactly one
// notification per committing transaction with new payments and every
// balance equal to its payments' sum.
func TestNotifyAndHookExactlyOnce(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "50ms", "--payers", "4", "--burn-rate", "20")
	pool, dbURL := pgtest.NewPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE balances (payer text PRIMARY KEY, amount numeric(78,0) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	const hook = `INSERT INTO balances (payer, amount) VALUES ($8, $10)
		ON CONFLICT (payer) DO UPDATE SET amount = balances.amount + EXCLUDED.amount`
	listener := listenPayments(t, dbURL)
	addrs := []string{freeAddr(t), freeAddr(t)}
	env := func(i int) []string {
		return pollerEnv(dbURL, info.RPCURL, info, addrs[i], "PAYMENT_HOOK_SQL="+hook, "MAX_BLOCK_RANGE=8")
	}
	replicas := []*proc{startProc(t, "replica-0", env(0), "poller"), startProc(t, "replica-1", env(1), "poller")}

	waitFor(t, time.Minute, "80 payments", func() bool { return countPayments(t, pool) >= 80 })
	replicas[0].signal(syscall.SIGKILL)
	replicas[0].wait(t, time.Minute)
	replicas[0] = startProc(t, "replica-0b", env(0), "poller")

	// Re-process what is recorded: a reset back and an overlapping backfill.
	var maxBefore int64
	if err := pool.QueryRow(ctx, `SELECT max(block_number) FROM payments`).Scan(&maxBefore); err != nil {
		t.Fatal(err)
	}
	back := cursorBlock(t, pool) - 40
	if out, code := runPoller(t, env(0), "cursor", "reset", "--to", fmt.Sprint(back), "--wait"); code != 0 {
		t.Fatalf("cursor reset exited %d:\n%s", code, out)
	}
	out, code := runPoller(t, env(0), "backfill", "--from", "0", "--to", fmt.Sprint(back+20))
	if code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	}
	if s := summaryOf(t, out); s.Duplicates == 0 {
		t.Fatalf("the backfill met no duplicates (%+v); the test proves nothing", s)
	}

	// Past everything recorded before the reset, so that the cursor covers
	// every row.
	waitFor(t, time.Minute, "the cursor past the re-processed blocks", func() bool { return cursorBlock(t, pool) >= maxBefore+20 })
	for _, p := range replicas {
		p.signal(syscall.SIGTERM)
		if c := p.wait(t, time.Minute); c != 0 {
			t.Fatalf("replica exited %d", c)
		}
	}
	assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, pool)))

	// Every balance is exactly the sum of its payments: credited once each.
	var wrong int
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM (SELECT payer, sum(amount) AS total FROM payments GROUP BY payer) p
		FULL JOIN balances b USING (payer)
		WHERE p.total IS DISTINCT FROM b.amount`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Fatalf("%d payers' balances differ from their payments' sum", wrong)
	}

	// One notification per transaction that inserted payments, and every
	// payment notified exactly once.
	var txs int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM payments`).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	// Every replica has exited, so every notification is sent; a marker
	// sent now arrives after all of them (commit order), and then nothing
	// more can come.
	notes := listener.sync(t, pool)
	if len(notes) != txs {
		t.Fatalf("%d notifications for %d inserting transactions", len(notes), txs)
	}
	seen := map[int64]int{}
	for _, n := range notes {
		if len(n.Payments) > 0 {
			if len(n.Payments) != n.Count {
				t.Fatalf("notification lists %d of %d payments", len(n.Payments), n.Count)
			}
			for _, p := range n.Payments {
				seen[p.ID]++
			}
			continue
		}
		for id := n.FirstID; id <= n.LastID; id++ {
			seen[id]++
		}
	}
	var ids []int64
	rows, err := pool.Query(ctx, `SELECT id FROM payments`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("payment %d notified %d times", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("%d ids notified, %d payments", len(seen), len(ids))
	}
}

func TestBadPaymentHookRefusesToStart(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "200ms")
	_, dbURL := pgtest.NewPool(t)
	env := pollerEnv(dbURL, info.RPCURL, info, freeAddr(t), "PAYMENT_HOOK_SQL=UPDATE no_such_table SET x = $10")
	out, code := runPoller(t, env, "run")
	if code != 2 || !strings.Contains(out, "PAYMENT_HOOK_SQL") || !strings.Contains(out, "no_such_table") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if n := bytes.Count([]byte(out), []byte(`"level":"ERROR"`)); n != 1 {
		t.Fatalf("%d error lines, want one:\n%s", n, out)
	}
}
