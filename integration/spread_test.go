package integration

import (
	"fmt"
	"math"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// readsOf is how many polls of group on the replica at addr read the
// chain (committed, or idle at the target); NaN while it does not answer.
func readsOf(addr, group string) float64 {
	return groupSample(addr, "burnpoller_polls_total", group, "result", "committed") +
		groupSample(addr, "burnpoller_polls_total", group, "result", "idle")
}

// readers samples, over window, which replicas read each group: the
// replicas whose reads of it grew. A replica that does not answer reads
// nothing.
func readers(addrs []string, groups []*chainGroup, window time.Duration) map[string][]int {
	before := make([][]float64, len(addrs))
	for i, addr := range addrs {
		for _, g := range groups {
			before[i] = append(before[i], readsOf(addr, g.name))
		}
	}
	time.Sleep(window)
	out := map[string][]int{}
	for i, addr := range addrs {
		for j, g := range groups {
			if after := readsOf(addr, g.name); after > before[i][j] && !math.IsNaN(before[i][j]) {
				out[g.name] = append(out[g.name], i)
			}
		}
	}
	return out
}

// held counts, from readers' answer, the groups each replica read.
func held(rs map[string][]int, replicas int) []int {
	out := make([]int, replicas)
	for _, rr := range rs {
		for _, r := range rr {
			out[r]++
		}
	}
	return out
}

// TestGroupsSpreadOverTheReplicaSet: four groups (four chains), three
// replicas serving them all. Once they agree, each group is read by one
// replica and no replica reads more than ⌈4/3⌉ + 1 = 3 groups; a replica
// killed, or frozen, hands its groups to the others (each is read again,
// its cursor moving); one back takes its share again; and every group's
// ledger equals its chain.
func TestGroupsSpreadOverTheReplicaSet(t *testing.T) {
	gs := startChainGroups(t, "a", "b", "c", "d")
	pool, dbURL := pgtest.NewPool(t)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var (
		mu       sync.Mutex
		replicas = make([]*proc, len(addrs))
	)
	startReplica := func(i int, gen int) {
		p := startProc(t, fmt.Sprintf("replica-%d.%d", i, gen), groupsReplicaEnv(dbURL, addrs[i], gs, "RESCAN_DEPTH=0", "POLL_INTERVAL=500ms"), "poller")
		mu.Lock()
		replicas[i] = p
		mu.Unlock()
	}
	for i := range addrs {
		startReplica(i, 0)
	}
	for _, addr := range addrs {
		waitFor(t, time.Minute, addr+" ready", func() bool { c, _ := readyz(addr); return c == 200 })
	}
	const bound = 3 // ⌈G/R⌉ + 1 with 4 groups and 3 replicas
	spread := func(what string, live []int) map[string][]int {
		t.Helper()
		var rs map[string][]int
		waitFor(t, 2*time.Minute, what, func() bool {
			rs = readers(addrs, gs, 2*time.Second)
			if len(rs) != len(gs) {
				return false
			}
			for _, rr := range rs {
				if len(rr) != 1 {
					return false
				}
			}
			return true
		})
		load := held(rs, len(addrs))
		t.Logf("%s: groups read per replica %v (%v)", what, load, rs)
		share := (len(gs) + len(live) - 1) / len(live)
		for _, i := range live {
			if load[i] > share+1 {
				t.Fatalf("%s: replica %d reads %d groups, more than ⌈%d/%d⌉ + 1", what, i, load[i], len(gs), len(live))
			}
		}
		// Healthy replicas: every one read-holds its share at most, and
		// three windows in a row keep the bound.
		for range 3 {
			rs := readers(addrs, gs, 2*time.Second)
			for i, n := range held(rs, len(addrs)) {
				if n > bound {
					t.Fatalf("%s: replica %d read %d groups in a window, more than %d (%v)", what, i, n, bound, rs)
				}
			}
		}
		return rs
	}
	rs := spread("the groups spread over three replicas", []int{0, 1, 2})

	// Kill a replica that holds a group: each of its groups is read again
	// by another, and moves on.
	victim := rs[gs[0].name][0]
	t.Logf("killing replica %d", victim)
	replicas[victim].signal(syscall.SIGKILL)
	replicas[victim].wait(t, 30*time.Second)
	for _, g := range gs {
		target := int64(finalizedBlock(t, g.info.RPCURL)) + 32
		waitFor(t, 2*time.Minute, "group "+g.name+" served after the kill", func() bool {
			return groupCursor(t, pool, g.cursorID()) >= target
		})
	}
	others := []int{}
	for i := range addrs {
		if i != victim {
			others = append(others, i)
		}
	}
	spread("the groups spread over the two left", others)

	// Back, it takes its share again.
	startReplica(victim, 1)
	waitFor(t, time.Minute, "the replica back ready", func() bool { c, _ := readyz(addrs[victim]); return c == 200 })
	rs = spread("the groups spread over three again", []int{0, 1, 2})

	// Freeze a holder: its groups are taken over while it is stopped; on
	// SIGCONT it rejoins.
	frozen := rs[gs[1].name][0]
	t.Logf("freezing replica %d", frozen)
	replicas[frozen].signal(syscall.SIGSTOP)
	for _, g := range gs {
		target := int64(finalizedBlock(t, g.info.RPCURL)) + 32
		waitFor(t, 2*time.Minute, "group "+g.name+" served while a holder is frozen", func() bool {
			return groupCursor(t, pool, g.cursorID()) >= target
		})
	}
	replicas[frozen].signal(syscall.SIGCONT)
	spread("the groups spread over three after the thaw", []int{0, 1, 2})

	for i, p := range replicas {
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, time.Minute); code != 0 {
			t.Fatalf("replica %d exited %d", i, code)
		}
	}
	for _, g := range gs {
		assertGroupLedgerEqualsChain(t, pool, g, uint64(groupCursor(t, pool, g.cursorID())))
	}
	// The replicas stopped cleanly removed their rows; the killed one's
	// expired.
	var fresh int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM replica_members WHERE heartbeat_at > now() - interval '2 seconds'`).Scan(&fresh); err != nil || fresh != 0 {
		t.Fatalf("%d membership rows still beaten after every replica stopped (%v)", fresh, err)
	}
}
