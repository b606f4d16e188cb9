package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/internal/tcpfault"
)

// TestGroupsChaos runs three replicas serving two groups (two chains)
// under burn traffic on both while killing, freezing and partitioning the
// replicas, dropping their database connections, and making group one's
// node hang and lie and group two's fail. During and after, for each
// group: the cursor never goes back, no payment lies beyond it, committed
// ranges never overlap or skip, and the ledger equals the chain's burns
// exactly.
func TestGroupsChaos(t *testing.T) {
	duration := chaosDuration(t) * 2 / 3
	pg := startChaosCluster(t)
	auditCursor(t, pg.pool)
	var gs []*chainGroup
	for i, name := range []string{"one", "two"} {
		_, info := startDevchain(t, "--chain-id", fmt.Sprint(1337+i), "--block-time", "100ms", "--burn-rate", "8", "--payers", "6")
		gs = append(gs, &chainGroup{name: name, info: info})
	}
	const txTimeout = 3 * time.Second
	type groupReplica struct {
		*replica
		rpcs []*rpcfault.Proxy // per group
	}
	var replicas []*groupReplica
	for i := range 3 {
		db, err := tcpfault.Start(fmt.Sprintf("127.0.0.1:%d", pg.cluster.Port()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		r := &groupReplica{replica: &replica{name: fmt.Sprintf("replica-%d", i), addr: freeAddr(t), db: db}}
		var targets []harness.Group
		for _, g := range gs {
			p := startProxy(t, g.info.RPCURL)
			r.rpcs = append(r.rpcs, p)
			targets = append(targets, harness.Group{Name: g.name, RPCURL: p.URL, ChainID: g.info.ChainID, Contract: g.info.BurnContract})
		}
		r.env = harness.GroupsEnv(pg.via(db), r.addr, targets, append(harness.TestSettings(),
			"MIGRATE=false", "MAX_BLOCK_RANGE=8", "LOCK_WAIT=1s", "TX_TIMEOUT="+txTimeout.String(),
			"RPC_TIMEOUT=1s", "SHUTDOWN_TIMEOUT=5s", "RESCAN_INTERVAL=5s")...)
		r.start(t)
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		waitFor(t, time.Minute, r.name+" ready", func() bool { c, _ := readyz(r.addr); return c == 200 })
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ivs := map[string]*invariants{}
	var watching sync.WaitGroup
	for _, g := range gs {
		iv := &invariants{last: -2}
		ivs[g.name] = iv
		watching.Go(func() { iv.watchGroup(ctx, pg.pool, g.cursorID(), g.info.ChainID) })
	}

	counts := map[string]int{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 31))
	eachProxy := func(group int, f func(*rpcfault.Faults)) {
		for _, r := range replicas {
			r.rpcs[group].Set(f)
		}
	}
	faults := []struct {
		name string
		do   func()
	}{
		{"sigkill a replica and restart it", func() {
			r := replicas[rng.IntN(3)]
			p := r.current()
			p.signal(syscall.SIGKILL)
			<-p.done
			time.Sleep(500 * time.Millisecond)
			r.start(t)
		}},
		{"sigstop a replica past TX_TIMEOUT, then sigcont", func() {
			p := replicas[rng.IntN(3)].current()
			p.signal(syscall.SIGSTOP)
			time.Sleep(txTimeout + 1500*time.Millisecond)
			p.signal(syscall.SIGCONT)
		}},
		{"drop a replica's database connections", func() { replicas[rng.IntN(3)].db.DropAll() }},
		{"partition a replica from the database past TX_TIMEOUT", func() {
			r := replicas[rng.IntN(3)]
			r.db.Partition(true)
			time.Sleep(txTimeout + time.Second)
			r.db.Partition(false)
		}},
		{"group one's node hangs for 3 s", func() {
			eachProxy(0, func(f *rpcfault.Faults) { f.Hang = math.MaxInt32 })
			time.Sleep(3 * time.Second)
			eachProxy(0, func(f *rpcfault.Faults) { f.Hang = 0 })
		}},
		{"group one's node lies", func() {
			eachProxy(0, func(f *rpcfault.Faults) { f.ForgeBurns, f.CorruptHashes, f.ForeignLogs = 2, 2, 2 })
		}},
		{"group two's node answers 500", func() { eachProxy(1, func(f *rpcfault.Faults) { f.ServerErrors = 4 }) }},
	}
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

	for _, r := range replicas {
		r.current().signal(syscall.SIGCONT)
		r.db.Partition(false)
		for _, p := range r.rpcs {
			p.Set(func(f *rpcfault.Faults) { *f = rpcfault.Faults{} })
		}
	}
	for _, g := range gs {
		target := int64(finalizedBlock(t, g.info.RPCURL))
		waitFor(t, 2*time.Minute, "group "+g.name+" caught up after the faults", func() bool {
			return groupCursor(t, pg.pool, g.cursorID()) >= target
		})
	}
	cancel()
	watching.Wait()
	for _, r := range replicas {
		p := r.current()
		waitFor(t, time.Minute, p.name+" started", func() bool { c, _ := readyz(r.addr); return c == 200 })
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}
	summary := map[string]any{"faults_seconds": duration.Seconds()}
	for _, g := range gs {
		cursor := groupCursor(t, pg.pool, g.cursorID())
		assertGroupLedgerEqualsChain(t, pg.pool, g, uint64(cursor))
		prev, moves := int64(-1), 0
		for _, m := range groupRanges(t, pg, g.cursorID()) {
			if m.Old != prev || m.New <= m.Old {
				t.Fatalf("group %s: cursor move %d -> %d after %d: ranges overlap, skip or go backwards", g.name, m.Old, m.New, prev)
			}
			prev = m.New
			moves++
		}
		iv := ivs[g.name]
		iv.mu.Lock()
		for _, v := range iv.violations {
			t.Errorf("group %s during the faults: %s", g.name, v)
		}
		summary[g.name] = map[string]any{"burns": len(groupTableRows(t, pg.pool, g.info.ChainID)), "committed_ranges": moves,
			"cursor": cursor, "invariant_checks": iv.checks}
		iv.mu.Unlock()
	}
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, fmt.Sprintf("%s: %d", n, counts[n]))
	}
	sort.Strings(names)
	summary["by_kind"] = names
	b, _ := json.Marshal(summary)
	t.Logf("groups chaos summary: %s", b)
}

// groupRanges are the audited moves of one cursor, in commit order.
func groupRanges(t *testing.T, pg *chaosCluster, cursorID string) []cursorMove {
	t.Helper()
	rows, err := pg.pool.Query(context.Background(), `SELECT old_block, new_block, at FROM cursor_audit WHERE id = $1 ORDER BY seq`, cursorID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []cursorMove
	for rows.Next() {
		var m cursorMove
		if err := rows.Scan(&m.Old, &m.New, &m.At); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// watchGroup is watch for one group of several: its cursor, and the
// payments of its chain.
func (iv *invariants) watchGroup(ctx context.Context, pool *pgxpool.Pool, cursorID string, chainID uint64) {
	for ctx.Err() == nil {
		var cursor, maxBlock int64
		err := pool.QueryRow(ctx, `SELECT
			coalesce((SELECT last_processed_block FROM block_cursors WHERE id = $1), -2),
			coalesce((SELECT max(block_number) FROM payments WHERE chain_id = $2), -1)`, cursorID, chainID).Scan(&cursor, &maxBlock)
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
