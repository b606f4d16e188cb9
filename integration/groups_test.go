package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/pgtopo"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/payments"
)

// groupsDB gives a test fresh, migrated databases, reached directly or
// through PgBouncer in transaction mode: pooled is what the replicas use as
// DATABASE_URL, direct reaches the server itself.
type groupsDB struct {
	name  string
	fresh func(t *testing.T) (pooled, direct string)
}

func groupsDatabases(t *testing.T) []groupsDB {
	t.Helper()
	direct := groupsDB{name: "direct", fresh: func(t *testing.T) (string, string) {
		t.Helper()
		_, url := pgtest.NewPool(t)
		return url, url
	}}
	var (
		srv     *pgtopo.Server
		bouncer *pgtopo.Bouncer
		n       int
	)
	pooled := groupsDB{name: "through PgBouncer", fresh: func(t *testing.T) (string, string) {
		t.Helper()
		if srv == nil {
			srv = pgtopo.Standalone(t)
			bouncer = pgtopo.NewBouncer(t, srv)
		}
		n++
		db := fmt.Sprintf("groups%d", n)
		srv.Exec(t, "postgres", "CREATE DATABASE "+db)
		if out, code := runPoller(t, []string{"DATABASE_URL=" + srv.URL(db)}, "migrate"); code != 0 {
			t.Fatalf("migrate exited %d:\n%s", code, out)
		}
		return bouncer.URL(db), srv.URL(db)
	}}
	return []groupsDB{direct, pooled}
}

// group is one poller group: a contract, its cursor id, and its replica.
type group struct {
	id       string
	contract common.Address
	from     uint64 // the contract's first block
	rpc      *rpcfault.Proxy
	addr     string
	p        *proc
}

// start runs the group's replica on the database; extra settings win.
func (g *group) start(t *testing.T, info devchain.Info, pooled, direct string, extra ...string) {
	t.Helper()
	g.addr = freeAddr(t)
	env := pollerEnv(pooled, g.rpc.URL, info, g.addr, append([]string{
		"DATABASE_DIRECT_URL=" + direct, "MIGRATE=false",
		fmt.Sprintf("BURN_CONTRACT=%s@%d", g.contract.Hex(), g.from), "CURSOR_ID=" + g.id,
		"RESCAN_DEPTH=0",
	}, extra...)...)
	g.p = startProc(t, "group-"+g.id, env, "poller")
}

func (g *group) stop(t *testing.T) {
	t.Helper()
	g.p.signal(syscall.SIGTERM)
	if code := g.p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("group %s exited %d", g.id, code)
	}
}

func groupCursor(t *testing.T, pool *pgxpool.Pool, id string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce((SELECT last_processed_block FROM block_cursors WHERE id = $1), -2)`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pauseOnce makes the first statement that stages an event of kind for
// contract sleep for d inside its transaction, so that a test can freeze
// the writer's process there: holding its cursor row, its writers' lock,
// its rows and its staged events. It returns a function giving the pid of
// the session sleeping (0 while none is).
func pauseOnce(t *testing.T, pool *pgxpool.Pool, contract common.Address, kind string, d time.Duration) func() int32 {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE SEQUENCE test_pause_once`,
		fmt.Sprintf(`CREATE FUNCTION test_pause() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM staged WHERE contract = '%s' AND kind = '%s') AND nextval('test_pause_once') = 1 THEN
				PERFORM pg_sleep(%f);
			END IF;
			RETURN NULL;
		END $$`, strings.ToLower(contract.Hex()), kind, d.Seconds()),
		`CREATE TRIGGER test_pause AFTER INSERT ON payment_events_staged REFERENCING NEW TABLE AS staged
		 FOR EACH STATEMENT EXECUTE FUNCTION test_pause()`,
		`CREATE EXTENSION IF NOT EXISTS pgrowlocks`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return func() int32 {
		var pid int32
		_ = pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event = 'PgSleep'`).Scan(&pid)
		return pid
	}
}

// justPastFinality waits until the chain's head is at most three blocks past
// its finalized block.
func justPastFinality(t *testing.T, rpcURL string) {
	t.Helper()
	c, err := ethclient.Dial(rpcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, time.Minute, "the head just past the finalized block", func() bool {
		f := finalizedBlock(t, rpcURL)
		head, err := c.BlockNumber(context.Background())
		return err == nil && head >= f && head-f <= 3
	})
}

// freezeInside waits for g's writer to sleep in the paused statement,
// stops its process (SIGSTOP), and waits until its session sits idle in
// its transaction. It then checks what the frozen session holds: the
// group's cursor row, its writers' lock and the staged events' table.
func freezeInside(t *testing.T, pool *pgxpool.Pool, g *group, sleeping func() int32) int32 {
	t.Helper()
	var pid int32
	waitFor(t, 2*time.Minute, "group "+g.id+"'s writer inside the paused statement", func() bool {
		pid = sleeping()
		return pid != 0
	})
	g.p.signal(syscall.SIGSTOP)
	t.Cleanup(func() { g.p.signal(syscall.SIGCONT) })
	waitFor(t, time.Minute, "the frozen writer's session idle in its transaction", func() bool {
		var state string
		_ = pool.QueryRow(context.Background(), `SELECT state FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&state)
		return state == "idle in transaction"
	})
	var cursorRow, writers, staged bool
	if err := pool.QueryRow(context.Background(), `SELECT
		EXISTS (SELECT 1 FROM pgrowlocks('block_cursors') WHERE $1 = ANY(pids)),
		EXISTS (SELECT 1 FROM pgrowlocks('writer_locks') WHERE $1 = ANY(pids)),
		EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND relation = 'payment_events_staged'::regclass AND granted)`,
		pid).Scan(&cursorRow, &writers, &staged); err != nil {
		t.Fatal(err)
	}
	if !cursorRow || !writers || !staged {
		t.Fatalf("the frozen writer holds cursor row %v, writers' lock %v, staged events %v: not the moment meant", cursorRow, writers, staged)
	}
	return pid
}

// neverBlockedBy samples, until stop is closed, the sessions waiting for a
// lock that the session frozen holds; it returns how many samples found one.
func neverBlockedBy(pool *pgxpool.Pool, frozen int32, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		blocked := 0
		for {
			select {
			case <-stop:
				out <- blocked
				return
			case <-time.After(20 * time.Millisecond):
			}
			var n int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))`, frozen).Scan(&n); err == nil && n > 0 {
				blocked++
			}
		}
	}()
	return out
}

// TestAFrozenGroupCostsAnotherGroupNothing: two groups (two contracts on
// one node, two cursor ids) share one database. Group A's only replica is
// frozen (SIGSTOP) at the worst moment constructed: inside its range
// transaction, holding its cursor row, its writers' lock, the payments it
// inserted and their staged events, with a TX_TIMEOUT of ten minutes so
// that the server does not free any of it during the test. Group B then
// catches up at its pace alone (each of its runs paired with a run of the
// same work on a database of its own, through the same 80 ms proxy: at least
// 0.9 of that pace in one of three pairs), no session of B ever waits for
// A, and when A thaws it completes; every ledger is exact and the event log
// gap-free. Directly and through PgBouncer in transaction mode.
func TestAFrozenGroupCostsAnotherGroupNothing(t *testing.T) {
	_, info := startDevchain(t, "--block-time", "100ms", "--payers", "4")
	lastA := sendBurns(t, info, 40, 10)
	const pairs = 3
	type contractB struct {
		addr common.Address
		from uint64
		last uint64
	}
	var bs []contractB
	for range 2 * pairs {
		addr, from, emit := secondContract(t, info)
		bs = append(bs, contractB{addr, from, emit(30)})
	}
	final := waitFinalized(t, info.RPCURL, max(lastA, bs[len(bs)-1].last))

	for i, db := range groupsDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			pooled, direct := db.fresh(t)
			pool := openPool(t, direct)
			proxyA, err := rpcfault.Start(info.RPCURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxyA.Close() })
			a := &group{id: "a", contract: info.BurnContract, rpc: proxyA}
			sleeping := pauseOnce(t, pool, a.contract, payments.KindConfirmed, 3*time.Second)
			a.start(t, info, pooled, direct, "TX_TIMEOUT=10m", "LOCK_WAIT=1s", "RPC_TIMEOUT=5s", "PENDING=false")
			frozen := freezeInside(t, pool, a, sleeping)
			frozenAt := groupCursor(t, pool, "a")

			// B's runs, each paired with the same work alone.
			catchUp := func(b *group, pooled, direct string, pool *pgxpool.Pool) time.Duration {
				start := time.Now()
				b.start(t, info, pooled, direct, "MAX_BLOCK_RANGE=2", "PENDING=false")
				waitFor(t, 2*time.Minute, "group "+b.id+" at block "+fmt.Sprint(final), func() bool { return groupCursor(t, pool, b.id) >= int64(final) })
				took := time.Since(start)
				b.stop(t)
				assertContractLedger(t, pool, info.RPCURL, b.contract, final)
				return took
			}
			stop := make(chan struct{})
			blocked := neverBlockedBy(pool, frozen, stop)
			var ratios []float64
			for k := range pairs {
				c := bs[i*pairs+k]
				latency := func() *rpcfault.Proxy {
					p, err := rpcfault.Start(info.RPCURL)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = p.Close() })
					p.Set(func(f *rpcfault.Faults) { f.Latency = 80 * time.Millisecond })
					return p
				}
				alonePooled, aloneDirect := db.fresh(t)
				alone := catchUp(&group{id: fmt.Sprintf("b%d", k), contract: c.addr, from: c.from, rpc: latency()},
					alonePooled, aloneDirect, openPool(t, aloneDirect))
				shared := catchUp(&group{id: fmt.Sprintf("b%d", k), contract: c.addr, from: c.from, rpc: latency()},
					pooled, direct, pool)
				ratios = append(ratios, alone.Seconds()/shared.Seconds())
				t.Logf("group b%d: %.2fs alone, %.2fs beside frozen group a (%.2f of its pace)", k, alone.Seconds(), shared.Seconds(), ratios[k])
				if ratios[k] >= 0.9 {
					break
				}
			}
			close(stop)
			if n := <-blocked; n > 0 {
				t.Fatalf("a session waited for the frozen group's session in %d samples", n)
			}
			if ratios[len(ratios)-1] < 0.9 {
				t.Fatalf("group b kept %.2f of its pace alone at best, want at least 0.9 (%v)", maxOf(ratios), ratios)
			}
			if got := groupCursor(t, pool, "a"); got != frozenAt {
				t.Fatalf("frozen group a's cursor moved from %d to %d", frozenAt, got)
			}

			// A thaws, finishes its transaction and catches up.
			a.p.signal(syscall.SIGCONT)
			waitFor(t, 2*time.Minute, "group a at block "+fmt.Sprint(final), func() bool { return groupCursor(t, pool, "a") >= int64(final) })
			a.stop(t)
			assertContractLedger(t, pool, info.RPCURL, a.contract, final)
			auditEvents(t, pool, info.ChainID)
		})
	}
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// TestAFrozenHeadTrackerCostsAnotherGroupNothing: group A's replica is
// frozen inside a head tracking transaction after staging the `seen` of a
// new burn and the chain's head (the chain's head row is shared by every
// group on the chain). Group B goes on seeing its new burns at the head at
// its pace alone (the same group on a database of its own, following the
// same contract through its own proxy, runs beside it: while B's burns
// arrive one at a time for a few seconds, B shows them all at least 0.9 as
// fast as the lone one does, in one of three rounds), records the chain's
// head and confirms them at finality, and no session of B waits for A.
// Directly and through PgBouncer.
func TestAFrozenHeadTrackerCostsAnotherGroupNothing(t *testing.T) {
	_, info := startDevchain(t, "--block-time", "100ms", "--payers", "4")
	addrB, fromB, emitB := secondContract(t, info)
	lastA := sendBurns(t, info, 4, 0)
	waitFinalized(t, info.RPCURL, lastA)
	for _, db := range groupsDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			pooled, direct := db.fresh(t)
			pool := openPool(t, direct)
			proxies := make([]*rpcfault.Proxy, 3)
			for i := range proxies {
				p, err := rpcfault.Start(info.RPCURL)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				proxies[i] = p
			}
			a := &group{id: "a", contract: info.BurnContract, rpc: proxies[0]}
			b := &group{id: "b", contract: addrB, from: fromB, rpc: proxies[1]}
			alonePooled, aloneDirect := db.fresh(t)
			alonePool := openPool(t, aloneDirect)
			bAlone := &group{id: "b", contract: addrB, from: fromB, rpc: proxies[2]}
			a.start(t, info, pooled, direct, "TX_TIMEOUT=10m", "LOCK_WAIT=1s", "RPC_TIMEOUT=5s")
			b.start(t, info, pooled, direct)
			bAlone.start(t, info, alonePooled, aloneDirect)
			target := finalizedBlock(t, info.RPCURL)
			for _, g := range []*group{a, b} {
				waitFor(t, 2*time.Minute, "group "+g.id+" caught up", func() bool { return groupCursor(t, pool, g.id) >= int64(target) })
			}
			waitFor(t, 2*time.Minute, "group b alone caught up", func() bool { return groupCursor(t, alonePool, "b") >= int64(target) })
			// The pause outlasts sendBurns' wait for its receipt and the
			// first looks at pg_stat_activity with three pollers and the
			// node on the same cores.
			sleeping := pauseOnce(t, pool, a.contract, payments.KindSeen, 10*time.Second)
			// Sent just past a finalized block, the burn stays above
			// finality for about 3 s, ample for a's head tracking to
			// stage its seen; sent just before one, the range could
			// confirm it first, with no seen to pause on.
			justPastFinality(t, info.RPCURL)
			sendBurns(t, info, 1, 0)
			frozen := freezeInside(t, pool, a, sleeping)
			stop := make(chan struct{})
			blocked := neverBlockedBy(pool, frozen, stop)

			headBefore := trackedHead(t, pool)
			// Rounds of B's burns, one at a time: each round's pace is the
			// time from its first burn until all of B's new burns show as
			// seen or confirmed, beside frozen A against alone.
			var (
				last   uint64
				ratios []float64
			)
			shown := func(p *pgxpool.Pool) int {
				var n int
				_ = p.QueryRow(context.Background(), `SELECT count(*) FROM payment_status
					WHERE contract = $1 AND block_number > $2 AND status IN ('seen', 'confirmed')`,
					strings.ToLower(addrB.Hex()), int64(target)).Scan(&n)
				return n
			}
			for round := range 3 {
				start := time.Now()
				for range 6 { // about a second each
					last = emitB(1)
				}
				var fresh int
				for _, r := range chainBurns(t, info.RPCURL, addrB, last) {
					if r.BlockNumber > target {
						fresh++
					}
				}
				var took [2]time.Duration
				waitFor(t, time.Minute, "group b's new burns seen or confirmed, beside a and alone", func() bool {
					for i, p := range []*pgxpool.Pool{pool, alonePool} {
						if took[i] == 0 && shown(p) == fresh {
							took[i] = time.Since(start)
						}
					}
					return took[0] > 0 && took[1] > 0
				})
				ratios = append(ratios, took[1].Seconds()/took[0].Seconds())
				t.Logf("round %d: b's %d new burns shown in %.2fs beside frozen a, %.2fs alone (%.2f of its pace)",
					round, fresh, took[0].Seconds(), took[1].Seconds(), ratios[round])
				if ratios[round] >= 0.9 {
					break
				}
			}
			if ratios[len(ratios)-1] < 0.9 {
				t.Fatalf("group b kept %.2f of its pace alone at best, want at least 0.9 (%v)", maxOf(ratios), ratios)
			}
			if head := trackedHead(t, pool); head <= headBefore {
				t.Fatalf("the chain's head stayed at %d while group a was frozen", head)
			}
			final := waitFinalized(t, info.RPCURL, last)
			waitFor(t, time.Minute, "group b's burns confirmed", func() bool { return groupCursor(t, pool, "b") >= int64(final) })
			close(stop)
			if n := <-blocked; n > 0 {
				t.Fatalf("a session waited for the frozen head tracker's session in %d samples", n)
			}
			b.stop(t)
			bAlone.stop(t)
			assertContractLedger(t, pool, info.RPCURL, addrB, final)
			var seen int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM payment_events WHERE contract = $1 AND kind = 'seen' AND block_number > $2`,
				strings.ToLower(addrB.Hex()), int64(target)).Scan(&seen); err != nil || seen == 0 {
				t.Fatalf("%d seen events of group b's new burns (%v)", seen, err)
			}

			a.p.signal(syscall.SIGCONT)
			waitFor(t, 2*time.Minute, "group a at block "+fmt.Sprint(final), func() bool { return groupCursor(t, pool, "a") >= int64(final) })
			a.stop(t)
			assertContractLedger(t, pool, info.RPCURL, a.contract, final)
			auditEvents(t, pool, info.ChainID)
		})
	}
}
