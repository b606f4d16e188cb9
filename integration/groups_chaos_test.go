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
	plain := make([]*replica, len(replicas))
	for i, r := range replicas {
		plain[i] = r.replica
	}
	faults := append(replicaFaults(t, plain, rng, func() *replica { return plain[rng.IntN(len(plain))] }, "a replica", txTimeout), []fault{
		{"group one's node hangs for 3 s", func() {
			eachProxy(0, func(f *rpcfault.Faults) { f.Hang = math.MaxInt32 })
			time.Sleep(3 * time.Second)
			eachProxy(0, func(f *rpcfault.Faults) { f.Hang = 0 })
		}},
		{"group one's node lies", func() {
			eachProxy(0, func(f *rpcfault.Faults) { f.ForgeBurns, f.CorruptHashes, f.ForeignLogs = 2, 2, 2 })
		}},
		{"group two's node answers 500", func() { eachProxy(1, func(f *rpcfault.Faults) { f.ServerErrors = 4 }) }},
	}...)
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
		for _, m := range committedRangesOf(t, pg.pool, g.cursorID()) {
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
