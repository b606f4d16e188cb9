package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/probe"
	"github.com/burnpoller/burnpoller/webhooks"
)

// chainGroup is one group of a replica set that serves several (GROUPS):
// a dev chain of its own (its own chain id), reached through a fault
// proxy.
type chainGroup struct {
	name string
	info devchain.Info
	rpc  *rpcfault.Proxy
}

// startChainGroups starts, for each name, a dev chain with burn traffic
// (chain ids 1337, 1338, …; devchain deploys the contracts at the same
// addresses on each) behind a fault proxy.
func startChainGroups(t *testing.T, names ...string) []*chainGroup {
	t.Helper()
	var gs []*chainGroup
	for i, name := range names {
		_, info := startDevchain(t, "--chain-id", fmt.Sprint(1337+i), "--block-time", "100ms", "--burn-rate", "5")
		gs = append(gs, &chainGroup{name: name, info: info, rpc: startProxy(t, info.RPCURL)})
	}
	return gs
}

// startProxy is a fault proxy to upstream, closed with the test.
func startProxy(t *testing.T, upstream string) *rpcfault.Proxy {
	t.Helper()
	p, err := rpcfault.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func (g *chainGroup) target() harness.Group {
	return harness.Group{Name: g.name, RPCURL: g.rpc.URL, ChainID: g.info.ChainID, Contract: g.info.BurnContract}
}

// cursorID is the group's default cursor id.
func (g *chainGroup) cursorID() string {
	return fmt.Sprintf("%d:%s", g.info.ChainID, strings.ToLower(g.info.BurnContract.Hex()))
}

// groupsReplicaEnv is the environment of a replica serving gs: the test
// settings for every group, then extra, where a later K=V wins.
func groupsReplicaEnv(dbURL, addr string, gs []*chainGroup, extra ...string) []string {
	targets := make([]harness.Group, len(gs))
	for i, g := range gs {
		targets[i] = g.target()
	}
	return harness.GroupsEnv(dbURL, addr, targets, append(harness.TestSettings(), extra...)...)
}

// groupTableRows are the payments of one chain.
func groupTableRows(t *testing.T, pool *pgxpool.Pool, chainID uint64) []ledgerRow {
	t.Helper()
	return tableRowsWhere(t, pool, "chain_id = $1", chainID)
}

// assertGroupLedgerEqualsChain compares one group's payments with its
// chain's burns up to block to, row by row.
func assertGroupLedgerEqualsChain(t *testing.T, pool *pgxpool.Pool, g *chainGroup, to uint64) {
	t.Helper()
	want := chainBurns(t, g.info.RPCURL, g.info.BurnContract, to)
	got := groupTableRows(t, pool, g.info.ChainID)
	if !slices.Equal(got, want) {
		t.Fatalf("group %s: ledger differs from its chain up to block %d: %d rows, want %d\nmissing: %v\nextra: %v", g.name,
			to, len(got), len(want), firstN(diffRows(want, got), 10), firstN(diffRows(got, want), 10))
	}
	if len(want) == 0 {
		t.Fatalf("group %s: no burns up to block %d: the test proves nothing", g.name, to)
	}
}

// readyzStatus is a replica's /readyz, decoded.
func readyzStatus(t *testing.T, addr string) (int, probe.Status) {
	t.Helper()
	code, body := readyz(addr)
	var st probe.Status
	if code != 0 {
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("/readyz body %q: %v", body, err)
		}
	}
	return code, st
}

// groupSample is the value of a group's metric on a replica (NaN while
// it does not answer).
func groupSample(addr, metric, group string, labels ...string) float64 {
	sample := fmt.Sprintf(`%s{group=%q`, metric, group)
	for i := 0; i+1 < len(labels); i += 2 {
		sample += fmt.Sprintf(",%s=%q", labels[i], labels[i+1])
	}
	v, ok := scrape(addr, sample+"}")
	if !ok {
		return math.NaN()
	}
	return v
}

// TestGroupsServedByOneReplicaSet: two chains, two groups, two replicas
// serving both. Each group's ledger equals its chain; the probes and the
// metrics are per group; the one-shot commands take --group.
func TestGroupsServedByOneReplicaSet(t *testing.T) {
	gs := startChainGroups(t, "one", "two")
	pool, dbURL := pgtest.NewPool(t)
	addrs := []string{freeAddr(t), freeAddr(t)}
	var replicas []*proc
	for i, addr := range addrs {
		replicas = append(replicas, startProc(t, fmt.Sprintf("replica-%d", i), groupsReplicaEnv(dbURL, addr, gs, "RESCAN_DEPTH=0"), "poller"))
	}
	for _, addr := range addrs {
		waitFor(t, time.Minute, addr+" ready", func() bool { c, _ := readyz(addr); return c == http.StatusOK })
	}
	// The process is ready before each group's poller has gone round once
	// (a group is "starting" until then): wait for group one's.
	waitFor(t, time.Minute, "group one ready on "+addrs[0], func() bool {
		_, st := readyzStatus(t, addrs[0])
		return st.Groups["one"].Status == probe.GroupReady
	})
	code, st := readyzStatus(t, addrs[0])
	if code != http.StatusOK || st.Status != "ready" || st.Checks["database"] != "ok" || len(st.Groups) != 2 ||
		st.Groups["one"].Status != probe.GroupReady || st.Groups["two"].Checks["node"] != "ok" {
		t.Fatalf("/readyz = %d %+v", code, st)
	}
	// Each group's cursor through a finalized block reached after start.
	targets := map[string]int64{}
	for _, g := range gs {
		targets[g.name] = int64(finalizedBlock(t, g.info.RPCURL)) + 32
	}
	for _, g := range gs {
		waitFor(t, 2*time.Minute, "group "+g.name+" past its target", func() bool {
			return groupCursor(t, pool, g.cursorID()) >= targets[g.name]
		})
	}
	for _, addr := range addrs {
		for _, g := range gs {
			if v := groupSample(addr, "burnpoller_cursor_block", g.name); math.IsNaN(v) {
				t.Errorf("%s serves no burnpoller_cursor_block of group %s", addr, g.name)
			}
		}
		if _, ok := scrape(addr, "burnpoller_cursor_block"); ok {
			t.Errorf("%s serves a burnpoller_cursor_block without a group", addr)
		}
	}
	for i, p := range replicas {
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, time.Minute); code != 0 {
			t.Fatalf("replica %d exited %d", i, code)
		}
	}
	env := groupsReplicaEnv(dbURL, "", gs)
	for _, g := range gs {
		cursor := groupCursor(t, pool, g.cursorID())
		assertGroupLedgerEqualsChain(t, pool, g, uint64(cursor))

		out, code := runPoller(t, env, "cursor", "show", "--json", "--group", g.name)
		var shown []struct {
			Group string `json:"group"`
			ID    string `json:"id"`
			Block int64  `json:"last_processed_block"`
		}
		if err := json.Unmarshal([]byte(lastLine(out)), &shown); code != 0 || err != nil || len(shown) != 1 ||
			shown[0].Group != g.name || shown[0].ID != g.cursorID() || shown[0].Block != cursor {
			t.Fatalf("cursor show --group %s exited %d: %s", g.name, code, out)
		}
		out, code = runPoller(t, env, "verify", "--group", g.name, "--from", "0", "--to", fmt.Sprint(cursor))
		if code != 0 || !strings.Contains(out, "clean") {
			t.Fatalf("verify --group %s exited %d:\n%s", g.name, code, out)
		}
	}
	out, code := runPoller(t, env, "verify", "--from", "0", "--to", "10")
	if code != 2 || !strings.Contains(out, "--group is required: GROUPS names one,two") {
		t.Fatalf("verify without --group exited %d:\n%s", code, out)
	}
}

// TestAGroupInTroubleCostsTheOthersNothing: one replica serves two groups;
// group one's node hangs, is on another chain, or lies. Group two keeps
// recording every burn, with no failed poll, and the replica stays ready
// while it serves it; group one is named in /readyz (and, when it needs
// an operator, in burnpoller_needs_operator). A webhook endpoint that does
// not resolve costs neither group a poll, nor the other endpoint an event,
// and no output shows its URL's secrets.
func TestAGroupInTroubleCostsTheOthersNothing(t *testing.T) {
	t.Run("node hung", func(t *testing.T) {
		gs := startChainGroups(t, "one", "two")
		one, two := gs[0], gs[1]
		pool, dbURL := pgtest.NewPool(t)
		addr := freeAddr(t)
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, gs, "RESCAN_DEPTH=0"), "poller")
		waitFor(t, time.Minute, "ready", func() bool { c, _ := readyz(addr); return c == http.StatusOK })
		errorsBefore := groupSample(addr, "burnpoller_polls_total", "two", "result", "error")

		one.rpc.Set(func(f *rpcfault.Faults) { f.Hang = math.MaxInt32 })
		waitFor(t, time.Minute, "group one's node hanging", func() bool { return one.rpc.Stats().Hung >= 3 })
		target := int64(finalizedBlock(t, two.info.RPCURL)) + 64
		waitFor(t, 2*time.Minute, "group two past its target while one's node hangs", func() bool {
			return groupCursor(t, pool, two.cursorID()) >= target
		})
		code, st := readyzStatus(t, addr)
		if code != http.StatusOK || st.Groups["two"].Status != probe.GroupReady || st.Groups["one"].Status != probe.GroupNotReady {
			t.Fatalf("/readyz while one's node hangs = %d %+v", code, st)
		}
		if after := groupSample(addr, "burnpoller_polls_total", "two", "result", "error"); after != errorsBefore {
			t.Fatalf("group two's failed polls went from %v to %v while one's node hung", errorsBefore, after)
		}
		if v := groupSample(addr, "burnpoller_polls_total", "one", "result", "error"); !(v > 0) {
			t.Fatalf("group one failed no poll (%v): the hang did not reach it", v)
		}

		one.rpc.Set(func(f *rpcfault.Faults) { f.Hang = 0 })
		caughtUp := int64(finalizedBlock(t, one.info.RPCURL))
		waitFor(t, 2*time.Minute, "group one caught up once its node answers", func() bool {
			return groupCursor(t, pool, one.cursorID()) >= caughtUp
		})
		stopAndCheck(t, p, pool, gs...)
	})

	t.Run("node on another chain", func(t *testing.T) {
		gs := startChainGroups(t, "one", "two")
		one, two := gs[0], gs[1]
		pool, dbURL := pgtest.NewPool(t)
		addr := freeAddr(t)
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, gs, "RESCAN_DEPTH=0", "ONE_CHAIN_ID=4242"), "poller")
		target := int64(finalizedBlock(t, two.info.RPCURL)) + 32
		waitFor(t, 2*time.Minute, "group two past its target", func() bool {
			return groupCursor(t, pool, two.cursorID()) >= target
		})
		waitFor(t, time.Minute, "group one named as needing an operator", func() bool {
			return groupSample(addr, "burnpoller_needs_operator", "one") == 1
		})
		code, st := readyzStatus(t, addr)
		if code != http.StatusOK || st.Groups["one"].Status != probe.GroupNeedsOperator || st.Groups["one"].Checks["poller"] != "wrong chain id" ||
			st.Groups["two"].Status != probe.GroupReady {
			t.Fatalf("/readyz with group one on another chain = %d %+v", code, st)
		}
		if v := groupSample(addr, "burnpoller_needs_operator", "two"); v != 0 {
			t.Fatalf("group two needs an operator: %v", v)
		}
		if !strings.Contains(p.out.String(), "group refused at start") {
			t.Fatal("no log line names the refused group")
		}
		if got := groupCursor(t, pool, fmt.Sprintf("4242:%s", strings.ToLower(one.info.BurnContract.Hex()))); got != -2 {
			t.Fatalf("the refused group seeded its cursor at %d", got)
		}
		stopAndCheck(t, p, pool, two)
	})

	t.Run("node lies", func(t *testing.T) {
		gs := startChainGroups(t, "one", "two")
		one := gs[0]
		pool, dbURL := pgtest.NewPool(t)
		addr := freeAddr(t)
		one.rpc.Set(func(f *rpcfault.Faults) { f.ForgeBurns, f.CorruptHashes, f.ForeignLogs = 4, 4, 4 })
		// Group one tracks no head, so the lies reach its writer's reads
		// (head tracking would otherwise take them first: it reads every
		// new block, and starts again from the cursor on a bad reply).
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, gs, "RESCAN_DEPTH=0", "ONE_PENDING=false"), "poller")
		waitFor(t, 2*time.Minute, "group one's node lied", func() bool {
			s := one.rpc.Stats()
			return s.ForgedLogs >= 4 && s.CorruptedLogs >= 4 && s.ForeignLogs >= 4
		})
		for _, g := range gs {
			target := int64(finalizedBlock(t, g.info.RPCURL)) + 32
			waitFor(t, 2*time.Minute, "group "+g.name+" past its target", func() bool {
				return groupCursor(t, pool, g.cursorID()) >= target
			})
		}
		if v := groupSample(addr, "burnpoller_polls_total", "one", "result", "error"); !(v > 0) {
			t.Fatalf("group one failed no poll (%v): the lies did not reach it", v)
		}
		if v := groupSample(addr, "burnpoller_polls_total", "two", "result", "error"); v != 0 {
			t.Fatalf("group two failed %v polls while one's node lied", v)
		}
		stopAndCheck(t, p, pool, gs...)
	})

	t.Run("finality violation", func(t *testing.T) {
		chain := startReorgChain(t)
		oneInfo := chain.c.Info()
		_, twoInfo := startDevchain(t, "--chain-id", "1338", "--block-time", "100ms", "--burn-rate", "5")
		one := &chainGroup{name: "one", info: oneInfo, rpc: startProxy(t, oneInfo.RPCURL)}
		two := &chainGroup{name: "two", info: twoInfo, rpc: startProxy(t, twoInfo.RPCURL)}
		pool, dbURL := pgtest.NewPool(t)
		addr := freeAddr(t)
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, []*chainGroup{one, two}, "RESCAN_DEPTH=0", "ONE_MAX_BLOCK_RANGE=40"), "poller")

		chain.burnUntil(100)
		head := chain.pauseAt(100)
		final := int64((head - 1) / 32 * 32)
		waitFor(t, time.Minute, fmt.Sprintf("group one's cursor at its finalized block %d", final), func() bool {
			return groupCursor(t, pool, one.cursorID()) == final
		})
		chain.forkAt(79)
		chain.burnUntil(uint64(final) + 40)
		waitFor(t, time.Minute, "group one latched", func() bool {
			return groupSample(addr, "burnpoller_finality_violation", "one") == 1
		})
		target := int64(finalizedBlock(t, two.info.RPCURL)) + 32
		waitFor(t, 2*time.Minute, "group two past its target while one is latched", func() bool {
			return groupCursor(t, pool, two.cursorID()) >= target
		})
		waitFor(t, time.Minute, "group one named as needing an operator", func() bool {
			return groupSample(addr, "burnpoller_needs_operator", "one") == 1
		})
		code, st := readyzStatus(t, addr)
		if code != http.StatusOK || st.Groups["one"].Status != probe.GroupNeedsOperator ||
			st.Groups["one"].Checks["poller"] != fmt.Sprintf("finality violation at block %d", final) || st.Groups["two"].Status != probe.GroupReady {
			t.Fatalf("/readyz with group one latched = %d %+v", code, st)
		}
		if c := groupCursor(t, pool, one.cursorID()); c != final {
			t.Fatalf("group one's cursor moved to %d while latched", c)
		}
		stopAndCheck(t, p, pool, two)
	})

	t.Run("webhook receiver does not resolve", func(t *testing.T) {
		gs := startChainGroups(t, "one", "two")
		pool, dbURL := pgtest.NewPool(t)
		addr := freeAddr(t)
		const hookSecret = "0123456789abcdef-unresolved"
		good := startReceiver(t, hookSecret)
		// A token as a host label (as in https://<token>.m.pipedream.net),
		// under .invalid, which never resolves; others in the user info,
		// the path and a bare query key.
		const bad = "https://hook:hookpass99@secrettoken123.invalid/in/Path-Token-42?Zx81kQ0pLmN2vB7c"
		secrets := []string{"secrettoken123", "hookpass99", "Path-Token-42", "Zx81kQ0pLmN2vB7c", "s3cr3t-path-token"}
		eps, err := webhooks.ParseEndpoints(bad + "," + good.URL())
		if err != nil {
			t.Fatal(err)
		}
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, gs, "RESCAN_DEPTH=0",
			"WEBHOOK_URL="+bad+","+good.URL(), "WEBHOOK_SECRET="+hookSecret, "WEBHOOK_EVENTS=seen,confirmed"), "poller")
		for _, g := range gs {
			target := int64(finalizedBlock(t, g.info.RPCURL)) + 32
			waitFor(t, 2*time.Minute, "group "+g.name+" past its target while a webhook endpoint does not resolve", func() bool {
				return groupCursor(t, pool, g.cursorID()) >= target
			})
		}
		status := func() map[string]webhooks.EndpointStatus {
			out, code := runPoller(t, []string{"DATABASE_URL=" + dbURL}, "webhooks", "status", "--json")
			var st []webhooks.EndpointStatus
			if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &st); code != 0 || err != nil {
				t.Fatalf("webhooks status --json exited %d (%v):\n%s", code, err, out)
			}
			byLabel := map[string]webhooks.EndpointStatus{}
			for _, s := range st {
				byLabel[s.Endpoint] = s
			}
			return byLabel
		}
		// The endpoint that resolves is sent every event; the other's
		// deliveries fail, each a DNS failure named by its label.
		var st map[string]webhooks.EndpointStatus
		waitFor(t, 2*time.Minute, "deliveries to the endpoint that resolves caught up, the other's failing", func() bool {
			st = status()
			return st[eps[1].Label].Delivered > 0 && st[eps[1].Label].Backlog == 0 &&
				strings.HasPrefix(st[eps[0].Label].LastError, "POST "+eps[0].Label+": dns: ")
		})
		if st[eps[0].Label].Backlog == 0 || st[eps[0].Label].Delivered != 0 {
			t.Fatalf("the endpoint that does not resolve: %+v", st[eps[0].Label])
		}
		// Every delivery it counts as delivered reached it; the chains go on
		// burning, so those enqueued since status read are left out.
		rows, err := pool.Query(context.Background(), `SELECT event_id FROM webhook_deliveries
			WHERE endpoint = $1 AND delivered_at IS NOT NULL`, eps[1].Label)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if missing := good.missing(ids); int64(len(ids)) < st[eps[1].Label].Delivered || len(missing) > 0 || len(good.problems()) > 0 {
			t.Fatalf("%d events delivered to the endpoint that resolves (%d by its status before), %d missing, problems %v",
				len(ids), st[eps[1].Label].Delivered, len(missing), good.problems())
		}
		for _, g := range gs {
			if v := groupSample(addr, "burnpoller_polls_total", g.name, "result", "error"); v != 0 {
				t.Fatalf("group %s failed %v polls while a webhook endpoint did not resolve", g.name, v)
			}
		}

		outputs := map[string]string{}
		for _, path := range []string{"/metrics", "/readyz"} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			outputs[path] = string(b)
		}
		var lastErrors string
		if err := pool.QueryRow(context.Background(), `SELECT string_agg(DISTINCT last_error, E'\n') FROM webhook_deliveries`).Scan(&lastErrors); err != nil {
			t.Fatal(err)
		}
		outputs["last_error"] = lastErrors
		outputs["webhooks status"], _ = runPoller(t, []string{"DATABASE_URL=" + dbURL}, "webhooks", "status")
		stopAndCheck(t, p, pool, gs...)
		outputs["log"] = p.out.String()
		if !strings.Contains(outputs["log"], "dns: ") || !strings.Contains(outputs["webhooks status"], "dns: ") {
			t.Fatalf("the DNS failure is neither logged nor shown: the test proves nothing\n%s", outputs["webhooks status"])
		}
		for what, o := range outputs {
			for _, s := range secrets {
				if i := strings.Index(o, s); i >= 0 {
					t.Errorf("%q appears in %s: %s", s, what, o[max(0, i-200):min(len(o), i+100)])
				}
			}
		}
	})

	t.Run("every group refused", func(t *testing.T) {
		gs := startChainGroups(t, "one", "two")
		_, dbURL := pgtest.NewPool(t)
		p := startProc(t, "replica", groupsReplicaEnv(dbURL, freeAddr(t), gs, "ONE_CHAIN_ID=4242", "TWO_CHAIN_ID=4243"), "poller")
		if code := p.wait(t, time.Minute); code != 2 {
			t.Fatalf("a replica with no group to serve exited %d, want 2", code)
		}
	})
}

// stopAndCheck stops replica p (exit 0) and checks that each of gs has a
// ledger equal to its chain up to its cursor.
func stopAndCheck(t *testing.T, p *proc, pool *pgxpool.Pool, gs ...*chainGroup) {
	t.Helper()
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("replica exited %d", code)
	}
	for _, g := range gs {
		assertGroupLedgerEqualsChain(t, pool, g, uint64(groupCursor(t, pool, g.cursorID())))
	}
}
