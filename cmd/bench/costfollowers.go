package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/internal/tcpfault"
)

// The followers of the cost phase (cost.go): burnpoller with a setting, or
// Ponder, each on its own database and behind its own counting proxies.

// costSubject is a follower to run on a cost chain.
type costSubject struct {
	name     string
	settings []string
	replicas int
	// endpoints is how many RPC_URL entries (counting proxies to the one
	// node) it gets: 2 for RPC_QUORUM=2.
	endpoints int
	ws        bool
	ponder    bool
	// bin, when set, is the poller binary to run (-cost-compare).
	bin string
}

// costSubjects are the followers of every cost chain: burnpoller's defaults
// with one and three replicas and with RPC_WS_URL, then (settings) one
// setting changed at a time, and Ponder when its project is given.
func costSubjects(settings, ponder bool, compare []string) []costSubject {
	var out []costSubject
	for _, nb := range compare {
		name, bin, _ := strings.Cut(nb, "=")
		out = append(out, costSubject{name: "poller " + name + ", defaults, 1 replica", replicas: 1, bin: bin})
	}
	out = append(out, []costSubject{
		{name: "burnpoller, defaults, 1 replica", replicas: 1},
		{name: "burnpoller, defaults, 3 replicas", replicas: 3},
		{name: "burnpoller, RPC_WS_URL", replicas: 1, ws: true},
	}...)
	if settings {
		out = append(out,
			costSubject{name: "burnpoller, POLL_INTERVAL=1s", replicas: 1, settings: []string{"POLL_INTERVAL=1s"}},
			costSubject{name: "burnpoller, PENDING=false", replicas: 1, settings: []string{"PENDING=false"}},
			costSubject{name: "burnpoller, VERIFY_RECEIPTS=false", replicas: 1, settings: []string{"VERIFY_RECEIPTS=false"}},
			costSubject{name: "burnpoller, RPC_QUORUM=2 (two endpoints)", replicas: 1, endpoints: 2, settings: []string{"RPC_QUORUM=2"}},
		)
	}
	if ponder {
		out = append(out, costSubject{name: "Ponder " + ponderVersion + " (polls every 1 s)", ponder: true})
	}
	return out
}

// follower is one running subject and its counters.
type follower struct {
	spec     costSubject
	proxies  []*rpcfault.Proxy
	ws       *tcpfault.Proxy
	replicas []*replica
	ponder   *ponderProc
	db       string
	dbURL    string
}

// close stops the follower and drops its database.
func (f *follower) close(ctx context.Context, admin string) {
	for _, r := range f.replicas {
		r.stop()
	}
	if f.ponder != nil {
		f.ponder.stop()
	}
	for _, p := range f.proxies {
		_ = p.Close()
	}
	if f.ws != nil {
		_ = f.ws.Close()
	}
	dropDB(ctx, admin, f.db)
}

// traffic is a follower's counters at one moment.
type traffic struct {
	calls    map[string]float64
	requests float64
	bytes    float64
	ws       float64
}

// traffic is the follower's counters now.
func (f *follower) traffic() traffic {
	t := traffic{calls: map[string]float64{}}
	for _, p := range f.proxies {
		s := p.Stats()
		for m, n := range s.Calls {
			t.calls[m] += float64(n)
		}
		t.requests += float64(s.Requests)
		t.bytes += float64(s.ResponseBytes)
	}
	if f.ws != nil {
		t.ws = float64(f.ws.BytesToClients())
	}
	return t
}

// trafficOf is the counters of every follower now.
func trafficOf(followers []*follower) []traffic {
	out := make([]traffic, len(followers))
	for i, f := range followers {
		out[i] = f.traffic()
	}
	return out
}

// subjectCost is subject sub's traffic from before to after, over blocks
// blocks, and per block, in calls by method and in compute units.
func subjectCost(sub costSubject, before, after traffic, blocks float64, weights map[string]float64) *CostSubject {
	c := &CostSubject{Name: sub.name, Settings: sub.settings, Replicas: sub.replicas, Calls: map[string]float64{},
		CUByMethodPerBlock: map[string]float64{}, CallsByMethodPerBlk: map[string]float64{}}
	for m, v := range after.calls {
		d := v - before.calls[m]
		if d <= 0 {
			continue
		}
		c.Calls[m] = d
		c.CallsPerBlock += d / blocks
		c.CallsByMethodPerBlk[m] = d / blocks
		w, ok := weights[m]
		if !ok {
			c.Unweighted = append(c.Unweighted, m)
		}
		c.CUByMethodPerBlock[m] = w * d / blocks
		c.CUPerBlock += w * d / blocks
	}
	slices.Sort(c.Unweighted)
	c.Requests = after.requests - before.requests
	c.ResponseBytes = after.bytes - before.bytes
	c.WSBytes = after.ws - before.ws
	c.RequestsPerBlock, c.BytesPerBlock, c.WSBytesPerBlock = c.Requests/blocks, c.ResponseBytes/blocks, c.WSBytes/blocks
	if c.WSBytes > 0 {
		c.CUByMethodPerBlock["websocket bytes"] = wsByteWeight * c.WSBytesPerBlock
		c.CUPerBlock += wsByteWeight * c.WSBytesPerBlock
	}
	return c
}

// startFollower starts subject sub (the i-th) on node n, each endpoint
// behind its own counting proxy, on a fresh database.
func (b *bench) startFollower(ctx context.Context, o options, n *realNode, sub costSubject, i int, logDir string, start []string) (*follower, error) {
	f := &follower{spec: sub, db: fmt.Sprintf("bench_cost_%d", i)}
	var err error
	if f.dbURL, err = freshDB(ctx, b.admin, f.db); err != nil {
		return nil, err
	}
	var urls []string
	for range max(1, sub.endpoints) {
		p, err := rpcfault.Start(n.url)
		if err != nil {
			f.close(ctx, b.admin)
			return nil, err
		}
		f.proxies = append(f.proxies, p)
		urls = append(urls, p.URL)
	}
	if sub.ponder {
		dir, err := filepath.Abs(o.ponder)
		if err == nil {
			err = ponderProject(ctx, dir)
		}
		if err == nil {
			f.ponder, err = startPonder(dir, f.dbURL, urls[0], n.chainID, b.info.BurnContract)
		}
		if err != nil {
			f.close(ctx, b.admin)
			return nil, err
		}
		return f, nil
	}
	env := slices.Concat(start, sub.settings)
	if sub.ws {
		if f.ws, err = tcpfault.Start(strings.TrimPrefix(n.wsURL, "ws://")); err != nil {
			f.close(ctx, b.admin)
			return nil, err
		}
		env = append(env, "RPC_WS_URL=ws://"+f.ws.Addr())
	}
	for r := range sub.replicas {
		rep, err := b.startBinary(cmp.Or(sub.bin, b.bin), strings.Join(urls, ","), b.info.BurnContract, f.dbURL, logDir,
			fmt.Sprintf("cost-%d-%d", i, r), env...)
		if err != nil {
			f.close(ctx, b.admin)
			return nil, err
		}
		f.replicas = append(f.replicas, rep)
	}
	return f, nil
}

// waitFollowing waits until every replica has polled (committed, idle or
// standby) and Ponder says its historical sync is done (/ready).
func (b *bench) waitFollowing(ctx context.Context, followers []*follower) error {
	return harness.WaitFor(ctx, 5*time.Minute, "every subject following the chain", func() bool {
		for _, f := range followers {
			if f.ponder != nil {
				if f.ponder.proc.Exited() {
					return true // reported below
				}
				if !answers200(ctx, "http://"+f.ponder.addr+"/ready") {
					return false
				}
			}
			if !allPolled(ctx, f.replicas) {
				return false
			}
		}
		return true
	})
}

// recorded counts what the follower recorded (its payments and pending
// payments, or Ponder's rows) and where its cursor stands.
func (f *follower) recorded(ctx context.Context) (n int, cursor int64, err error) {
	conn, err := pgx.Connect(ctx, f.dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(ctx)
	if f.ponder != nil {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM bench.burn`).Scan(&n)
		return n, 0, err
	}
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM payments) + (SELECT count(*) FROM pending_payments),
		(SELECT max(last_processed_block) FROM block_cursors)`).Scan(&n, &cursor)
	return n, cursor, err
}
