package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtopo"
)

// failoverTraffic sends a burn every interval (every fifth one a two-burn
// BatchBurner transaction) from a goroutine until stopped, so that the
// replicas keep committing while the database fails over.
type failoverTraffic struct {
	sender *devchain.Sender
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	txs  []*types.Transaction
	errs []error
}

func startFailoverTraffic(t *testing.T, info devchain.Info, interval time.Duration) *failoverTraffic {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client, err := ethclient.DialContext(ctx, info.RPCURL)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s, err := devchain.NewSender(client, info)
	if err != nil {
		cancel()
		client.Close()
		t.Fatal(err)
	}
	b := &failoverTraffic{sender: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var tx *types.Transaction
			var err error
			if i%5 == 4 {
				tx, err = s.BurnTwice(ctx, i%s.Payers(), devchain.RandomAmount(), devchain.RandomDigest(), devchain.RandomAmount(), devchain.RandomDigest())
			} else {
				tx, err = s.Burn(ctx, i%s.Payers(), devchain.RandomAmount(), devchain.RandomDigest())
			}
			b.mu.Lock()
			switch {
			case err == nil:
				b.txs = append(b.txs, tx)
			case ctx.Err() == nil:
				b.errs = append(b.errs, err)
			}
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-b.done
		client.Close()
	})
	return b
}

// sent is how many burn transactions have been sent so far.
func (b *failoverTraffic) sent() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.txs)
}

// stop ends the traffic, waits until every transaction sent is mined and
// returns the highest block holding one.
func (b *failoverTraffic) stop(t *testing.T) uint64 {
	t.Helper()
	b.cancel()
	<-b.done
	b.mu.Lock()
	txs, errs := b.txs, b.errs
	b.mu.Unlock()
	for _, err := range errs {
		t.Logf("sending a burn: %v", err)
	}
	if len(txs) == 0 {
		t.Fatal("no burn was sent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last uint64
	for _, tx := range txs {
		rc, err := b.sender.WaitMined(ctx, tx)
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, rc.BlockNumber.Uint64())
	}
	return last
}

// failoverPool is a pool on url, closed when the test ends.
func failoverPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// failoverState is what a database holds of the ledger at one moment.
type failoverState struct {
	Cursor   int64 // -2 before a replica seeded it
	Payments int
	AuditSeq int64 // highest cursor_audit sequence number (0: none)
}

func readFailoverState(ctx context.Context, pool *pgxpool.Pool) (failoverState, error) {
	var s failoverState
	err := pool.QueryRow(ctx, `SELECT
			coalesce((SELECT last_processed_block FROM block_cursors WHERE id NOT LIKE 'backfill:%'), -2),
			(SELECT count(*) FROM payments),
			coalesce((SELECT max(seq) FROM cursor_audit), 0)`).Scan(&s.Cursor, &s.Payments, &s.AuditSeq)
	return s, err
}

func mustFailoverState(t *testing.T, pool *pgxpool.Pool) failoverState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := readFailoverState(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// failoverNextCommit polls pool every 20 ms until its ledger differs from base (a
// cursor move or a payment committed) and returns when that was first seen,
// and when the first cursor update after base ran by the server's clock
// (cursor_audit.at, just before its commit).
func failoverNextCommit(t *testing.T, pool *pgxpool.Pool, base failoverState, timeout time.Duration) (seen, updated time.Time) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := readFailoverState(ctx, pool)
		cancel()
		if err == nil && (s.Cursor != base.Cursor || s.Payments != base.Payments || s.AuditSeq != base.AuditSeq) {
			seen = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no commit on the new primary within %s of the promotion (last error: %v)", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := pool.QueryRow(context.Background(), `SELECT at FROM cursor_audit WHERE seq > $1 ORDER BY seq LIMIT 1`, base.AuditSeq).Scan(&updated); err != nil {
		// A commit of payments without a cursor move is not possible, but
		// the figure is only informative.
		t.Logf("no audited cursor move after the promotion yet: %v", err)
	}
	return seen, updated
}

// failoverPromote promotes s (pg_ctl promote) and returns when it first
// answered pg_is_in_recovery() = false, polled every 5 ms meanwhile: the
// moment it accepted writes, within 5 ms. pg_ctl returns up to 100 ms later.
func failoverPromote(t *testing.T, s *pgtopo.Server) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	writable := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var inRecovery bool
			if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err == nil && !inRecovery {
				writable <- time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := s.Promote(); err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	<-done
	select {
	case at := <-writable:
		return at
	default:
		t.Fatal("the promoted standby never left recovery")
	}
	return time.Time{}
}

// failoverStandbyReplayedAll waits until the standby has replayed every WAL
// record it received (after the primary died, nothing more arrives), so
// that what it shows is what it will have once promoted.
func failoverStandbyReplayedAll(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	waitFor(t, 30*time.Second, "the standby to replay all it received", func() bool {
		var done bool
		err := pool.QueryRow(context.Background(),
			`SELECT coalesce(pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(), false)`).Scan(&done)
		return err == nil && done
	})
}

// failoverContiguousMoves fails unless the audited cursor moves on pool go
// forward in contiguous, non-overlapping ranges ending at cursor.
func failoverContiguousMoves(t *testing.T, pool *pgxpool.Pool, cursor int64) int {
	t.Helper()
	moves := committedRanges(t, pool)
	if len(moves) == 0 {
		t.Fatal("no audited cursor move")
	}
	prev := moves[0].Old
	for _, m := range moves {
		if m.Old != prev || m.New <= m.Old {
			t.Fatalf("cursor move %d -> %d after %d: ranges overlap, skip or go backwards", m.Old, m.New, prev)
		}
		prev = m.New
	}
	if prev != cursor {
		t.Fatalf("audited cursor ends at %d, the table says %d", prev, cursor)
	}
	return len(moves)
}

// failoverDBNotReady says whether a replica's /readyz answers 503 with the
// database check failing, and with which state.
func failoverDBNotReady(addr string) (string, bool) {
	code, body := readyz(addr)
	if code != 503 {
		return "", false
	}
	for _, state := range []string{"unreachable", "read-only"} {
		if strings.Contains(body, `"database":"`+state+`"`) {
			return state, true
		}
	}
	return "", false
}

// failoverRun is three replicas on a primary with a streaming standby,
// connected through a URL naming both hosts, with burns arriving.
type failoverRun struct {
	t        *testing.T
	pair     *pgtopo.Pair
	info     devchain.Info
	traffic  *failoverTraffic
	primary  *pgxpool.Pool // on the original primary
	addrs    []string
	replicas []*proc
}

func newFailoverRun(t *testing.T, sync bool) *failoverRun {
	t.Helper()
	pair := pgtopo.NewPair(t, sync)
	pair.CreateDatabase(t, "burn")
	_, info := startDevchain(t, "--block-time", "50ms", "--payers", "4")
	r := &failoverRun{t: t, pair: pair, info: info, primary: failoverPool(t, pair.Primary.URL("burn"))}
	r.traffic = startFailoverTraffic(t, info, 100*time.Millisecond)
	dbURL := pair.MultiHostURL("burn")
	// FINALITY=latest: the target moves with every block rather than with
	// every 32-block epoch of the dev chain's finalized block, so that the
	// time from the promotion to the next commit measures the replicas,
	// not the chain's cadence.
	for i := range 3 {
		addr := freeAddr(t)
		r.addrs = append(r.addrs, addr)
		r.replicas = append(r.replicas, startProc(t, fmt.Sprintf("poller-%d", i),
			pollerEnv(dbURL, info.RPCURL, info, addr, "PENDING=false", "FINALITY=latest", "CONFIRMATIONS=5", "DATABASE_MAX_CONNS=4"), "poller"))
	}
	// Audit cursor moves once the schema exists, so that contiguity can
	// be checked across the failover.
	waitFor(t, time.Minute, "the cursor seeded", func() bool {
		var n int
		err := r.primary.QueryRow(context.Background(), `SELECT count(*) FROM block_cursors`).Scan(&n)
		return err == nil && n > 0
	})
	auditCursor(t, r.primary)
	for i, addr := range r.addrs {
		waitFor(t, time.Minute, fmt.Sprintf("replica %d ready", i), func() bool { c, _ := readyz(addr); return c == 200 })
	}
	waitFor(t, time.Minute, "20 payments committed on the primary", func() bool {
		s, err := readFailoverState(context.Background(), r.primary)
		return err == nil && s.Payments >= 20
	})
	return r
}

// finish stops the traffic, waits until the cursor on pool (the new
// primary) covers every burn, SIGTERMs the replicas (exit 0 each), and
// checks the ledger there against the chain, row by row.
func (r *failoverRun) finish(pool *pgxpool.Pool) []ledgerRow {
	t := r.t
	t.Helper()
	last := r.traffic.stop(t)
	waitFor(t, time.Minute, fmt.Sprintf("cursor on the new primary past block %d", last), func() bool {
		s, err := readFailoverState(context.Background(), pool)
		return err == nil && s.Cursor >= int64(last)
	})
	for i, p := range r.replicas {
		if v, ok := scrape(r.addrs[i], "burnpoller_payments_duplicate_total"); ok && v != 0 {
			t.Errorf("replica %d: burnpoller_payments_duplicate_total = %v, want 0", i, v)
		}
		p.signal(syscall.SIGTERM)
		// SHUTDOWN_TIMEOUT bounds the exit; the minute is only a guard.
		if code := p.wait(t, time.Minute); code != 0 {
			t.Fatalf("replica %d exited %d after SIGTERM, want 0", i, code)
		}
	}
	cursor := cursorBlock(t, pool)
	rows := assertLedgerEqualsChain(t, pool, r.info.RPCURL, r.info.BurnContract, uint64(cursor))
	moves := failoverContiguousMoves(t, pool, cursor)
	t.Logf("%d burns (%d transactions sent) in the ledger up to block %d, %d audited cursor moves", len(rows), r.traffic.sent(), cursor, moves)
	return rows
}

// TestPrimaryFailover kills the primary under three replicas committing
// payments and promotes its standby (synchronous and asynchronous
// replication): the replicas must report the database unready meanwhile,
// go on on the new primary through target_session_attrs=read-write, and
// leave a ledger there that equals the chain, nothing lost, nothing doubled.
func TestPrimaryFailover(t *testing.T) {
	for _, mode := range []struct {
		name string
		sync bool
	}{{"sync", true}, {"async", false}} {
		t.Run(mode.name, func(t *testing.T) {
			r := newFailoverRun(t, mode.sync)
			standby := failoverPool(t, r.pair.Standby.URL("burn"))

			if !mode.sync {
				// Asynchronous replication lets the standby fall behind.
				// Make it certain: stop its WAL receiver, so that the
				// primary's last commits never reach it and must be
				// recorded again from the chain after the failover.
				r.pair.Standby.Exec(t, "postgres", "ALTER SYSTEM SET primary_conninfo = ''")
				r.pair.Standby.Exec(t, "postgres", "SELECT pg_reload_conf()")
				waitFor(t, 30*time.Second, "the standby's WAL receiver to stop", func() bool {
					var n int
					err := standby.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_wal_receiver`).Scan(&n)
					return err == nil && n == 0
				})
				behind := mustFailoverState(t, standby)
				waitFor(t, time.Minute, "the primary 10 payments ahead of the cut-off standby", func() bool {
					s, err := readFailoverState(context.Background(), r.primary)
					return err == nil && s.Payments >= behind.Payments+10
				})
			}

			// What the test saw committed just before the primary dies.
			seen := mustFailoverState(t, r.primary)
			r.pair.Primary.Kill()
			killedAt := time.Now()
			r.primary.Close()

			// No host accepts writes: readiness says so.
			var state string
			waitFor(t, 30*time.Second, "a replica to report the database not ready", func() bool {
				for _, addr := range r.addrs {
					if s, ok := failoverDBNotReady(addr); ok {
						state = s
						return true
					}
				}
				return false
			})
			t.Logf("between the kill and the promotion, /readyz says database %q", state)

			// What the standby has is what the new primary starts from.
			failoverStandbyReplayedAll(t, standby)
			base := mustFailoverState(t, standby)
			baseRows := tableRows(t, standby)
			if mode.sync && (base.Payments < seen.Payments || base.Cursor < seen.Cursor) {
				t.Fatalf("synchronous standby lacks commits seen on the primary: standby has %d payments up to block %d, the primary showed %d up to block %d",
					base.Payments, base.Cursor, seen.Payments, seen.Cursor)
			}
			promotedAt := failoverPromote(t, r.pair.Standby)
			committed, updated := failoverNextCommit(t, standby, base, 60*time.Second)
			t.Logf("failover (%s): kill -> writable %s; promotion -> next commit seen %s (its cursor update ran at +%s by the server's clock); kill -> next commit %s",
				mode.name, promotedAt.Sub(killedAt).Round(time.Millisecond), committed.Sub(promotedAt).Round(time.Millisecond),
				updated.Sub(promotedAt).Round(time.Millisecond), committed.Sub(killedAt).Round(time.Millisecond))
			t.Logf("before the kill the primary showed %d payments up to block %d; the standby had %d up to block %d at the promotion",
				seen.Payments, seen.Cursor, base.Payments, base.Cursor)
			// Burns keep arriving for a while on the new primary.
			sentAt := r.traffic.sent()
			waitFor(t, time.Minute, "10 more burns sent after the promotion", func() bool { return r.traffic.sent() >= sentAt+10 })
			for i, addr := range r.addrs {
				waitFor(t, time.Minute, fmt.Sprintf("replica %d ready on the new primary", i), func() bool { c, _ := readyz(addr); return c == 200 })
			}

			rows := r.finish(standby)

			// Start the old primary again, now that no replica can write
			// to it, to read what it had committed when it died: what the
			// standby lacked, and none of it missing from the new ledger.
			if err := r.pair.Primary.Start(); err != nil {
				t.Fatal(err)
			}
			old := failoverPool(t, r.pair.Primary.URL("burn"))
			oldState := mustFailoverState(t, old)
			oldRows := tableRows(t, old)
			old.Close()
			r.pair.Primary.Kill()
			lacked := diffRows(oldRows, baseRows)
			t.Logf("%s: at the promotion the standby lacked %d of the %d payments the old primary had committed (cursor %d there, %d on the standby)",
				mode.name, len(lacked), len(oldRows), oldState.Cursor, base.Cursor)
			if lost := diffRows(oldRows, rows); len(lost) != 0 {
				t.Fatalf("%d payments the old primary had committed are not in the new ledger: %v", len(lost), firstN(lost, 10))
			}
			if !mode.sync && len(lacked) == 0 {
				t.Fatal("the cut-off standby lacked no payment: the test proves nothing about re-recording")
			}
		})
	}
}

// TestReadOnlyPrimaryConnectionsAreDropped turns the primary read-only under
// running replicas, without stopping it: their writes fail with SQLSTATE
// 25006, and their connections to it must be dropped rather than retried,
// so that once the standby is promoted (the read-only server still
// running) target_session_attrs=read-write takes them there.
func TestReadOnlyPrimaryConnectionsAreDropped(t *testing.T) {
	r := newFailoverRun(t, false)
	standby := failoverPool(t, r.pair.Standby.URL("burn"))

	// ALTER SYSTEM refuses a transaction block: one statement each.
	r.pair.Primary.Exec(t, "postgres", "ALTER SYSTEM SET default_transaction_read_only = on")
	r.pair.Primary.Exec(t, "postgres", "SELECT pg_reload_conf()")
	readOnlyAt := time.Now()

	var how string
	waitFor(t, 30*time.Second, "a replica to report the database not ready or to log SQLSTATE 25006", func() bool {
		for i, addr := range r.addrs {
			if s, ok := failoverDBNotReady(addr); ok {
				how = fmt.Sprintf("replica %d's /readyz says database %q", i, s)
				return true
			}
		}
		for i, p := range r.replicas {
			if strings.Contains(p.out.String(), "25006") {
				how = fmt.Sprintf("replica %d logged SQLSTATE 25006", i)
				return true
			}
		}
		return false
	})
	t.Logf("%s %s after the primary turned read-only", how, time.Since(readOnlyAt).Round(time.Millisecond))

	r.pair.WaitReplayed(t)
	base := mustFailoverState(t, standby)
	promotedAt := failoverPromote(t, r.pair.Standby)
	// The read-only server is still up: the replicas can reach the new
	// primary only if they dropped their connections to it.
	committed, updated := failoverNextCommit(t, standby, base, 60*time.Second)
	t.Logf("read-only primary: read-only -> writable standby %s; promotion -> next commit seen %s (cursor update ran at +%s by the server's clock)",
		promotedAt.Sub(readOnlyAt).Round(time.Millisecond), committed.Sub(promotedAt).Round(time.Millisecond), updated.Sub(promotedAt).Round(time.Millisecond))
	for i, addr := range r.addrs {
		waitFor(t, time.Minute, fmt.Sprintf("replica %d ready on the new primary", i), func() bool { c, _ := readyz(addr); return c == 200 })
	}
	// The first failure drops every connection of the pool (they all reach
	// the read-only server): a replica fails once, twice at most when a
	// second transaction (a probe's, the contract backfill's) was already
	// under way, never once per connection, never over and over.
	var failed []int
	for i, p := range r.replicas {
		n := 0
		for _, l := range strings.Split(p.out.String(), "\n") {
			if strings.Contains(l, "poll failed") && strings.Contains(l, "25006") {
				n++
			}
		}
		if n > 2 {
			t.Errorf("replica %d failed %d polls with SQLSTATE 25006: connections to the read-only server were used again", i, n)
		}
		failed = append(failed, n)
	}
	t.Logf("polls failed with SQLSTATE 25006, per replica: %v", failed)
	// No replica keeps a ledger session (application_name burnpoller/<schema>) on
	// the read-only server: the ones that failed were dropped, not kept
	// for retries. The session pool's connection left idle by the
	// migrations (burnpoller-session) is not the ledger's and is not
	// counted; it is logged.
	old := failoverPool(t, r.pair.Primary.URL("burn"))
	lingering := func(app string) []string {
		rows, err := old.Query(context.Background(), `SELECT application_name || ' ' || state || ' since ' || state_change::text || ': ' || query
			FROM pg_stat_activity WHERE datname = 'burn' AND application_name = $1`, app)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := harness.WaitFor(context.Background(), 30*time.Second, "no burnpoller session left on the read-only server", func() bool {
		return len(lingering(ledgerApp)) == 0
	}); err != nil {
		t.Fatalf("%v: %q", err, lingering(ledgerApp))
	}
	if s := lingering(migrations.SessionName("burnpoller-session")); len(s) > 0 {
		t.Logf("sessions of the session pool still open on the read-only server: %q", s)
	}
	old.Close()
	r.pair.Primary.Kill()

	r.finish(standby)
}
