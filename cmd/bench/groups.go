package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// Groups is many groups on one database: a burn contract each on one
// node, one poller process per group (its own CURSOR_ID and
// BURN_CONTRACT), catching up together from an empty ledger, each group's
// time against its time alone (issue 17).
type Groups struct {
	Node          string     `json:"node"`
	Seed          *denseSeed `json:"seed"`
	BurnsPerGroup int        `json:"burns_per_group"`
	// CapBlocks is the latency proxy's eth_getLogs block cap.
	CapBlocks   uint64     `json:"latency_proxy_cap_blocks"`
	Settings    string     `json:"poller_settings"`
	LoadAtStart string     `json:"load_average_at_start"`
	Runs        []GroupRun `json:"runs"`
	// Alone is each group's catch-up with no other group running, by
	// latency: the denominators of the ratios.
	Alone []GroupRun `json:"alone"`
}

// GroupRun is the groups [0, Groups) catching up together, or one group
// alone.
type GroupRun struct {
	LatencyMs int64 `json:"latency_ms"`
	Groups    int   `json:"groups"`
	// Group is the one group of an alone run; -1 for runs together.
	Group int `json:"group"`
	// Seconds is each group's time from the start of every process to its
	// cursor at the target.
	Seconds []float64 `json:"seconds"`
	// ToAlone is each group's Seconds over its time alone at the same
	// latency; MaxToAlone the largest of them.
	ToAlone    []float64 `json:"to_alone,omitempty"`
	MaxToAlone float64   `json:"max_to_alone,omitempty"`
	// BurnsPerSec is every group's burns over the time the last group
	// took: the database's throughput across groups.
	BurnsPerSec float64 `json:"total_burns_per_second"`
	// Requests is the HTTP requests each group's proxy saw (through the
	// latency proxy only).
	Requests []int `json:"http_requests,omitempty"`
	// CPUSeconds is the CPU time each part used during the run: the
	// pollers together, the node and the database's backends (the
	// latency proxies run inside the bench and are not counted).
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
}

// groupsPhase seeds one node with a burn contract per group, the groups'
// burns interleaved block by block, then, with the latency proxy and
// straight to the node, times each group alone and every count of
// -groups catching up together.
func (b *bench) groupsPhase(ctx context.Context, o options) (*Groups, error) {
	counts, err := parseCounts(o.groupCounts)
	if err != nil {
		return nil, err
	}
	most := slices.Max(counts)
	bin := o.geth
	if o.groupsNode == nodeAnvil {
		bin = o.anvil
	}
	n, err := startNode(ctx, o.groupsNode, bin, nodeOptions{})
	if err != nil {
		return nil, err
	}
	defer n.close()
	s, err := newSeeder(ctx, n)
	if err != nil {
		return nil, err
	}
	contracts := make([]burnContracts, most)
	for i := range contracts {
		if contracts[i], err = s.deployBurner(ctx); err != nil {
			return nil, err
		}
	}
	b.groupCap = o.groupCap
	g := &Groups{Node: o.groupsNode, BurnsPerGroup: o.groupBurns, CapBlocks: o.groupCap, Settings: "defaults; POLL_INTERVAL=200ms; CURSOR_ID group-<i>",
		LoadAtStart: loadAverage()}
	if g.Seed, err = s.seedDense(ctx, contracts, o.groupBurns, o.perTx, o.txsPerBlock); err != nil {
		return nil, err
	}
	b.info = devchain.Info{RPCURL: n.url, ChainID: n.chainID}
	b.node = n
	defer func() { b.node = nil }()
	b.log.Info("groups seeded", slog.Int("groups", most), slog.Int("burns_per_group", o.groupBurns),
		slog.Uint64("finalized", g.Seed.Finalized), slog.Float64("seconds", g.Seed.SeedSeconds))
	var latencies []time.Duration
	if o.groupsLatency {
		latencies = append(latencies, o.groupLatency)
	}
	if o.groupsDense {
		latencies = append(latencies, 0)
	}
	for _, lat := range latencies {
		// One run untimed first: the node's caches warm, as they are for
		// every run after it.
		if _, err := b.groupRun(ctx, contracts[:1], 0, lat, g.Seed.Finalized, o.groupBurns); err != nil {
			return nil, fmt.Errorf("warming up, latency %s: %w", lat, err)
		}
		alone := make([]float64, most)
		for i := range most {
			r, err := b.groupRun(ctx, contracts[i:i+1], i, lat, g.Seed.Finalized, o.groupBurns)
			if err != nil {
				return nil, fmt.Errorf("group %d alone, latency %s: %w", i, lat, err)
			}
			r.Group = i
			alone[i] = r.Seconds[0]
			g.Alone = append(g.Alone, r)
		}
		for _, k := range counts {
			r, err := b.groupRun(ctx, contracts[:k], 0, lat, g.Seed.Finalized, o.groupBurns)
			if err != nil {
				return nil, fmt.Errorf("%d groups, latency %s: %w", k, lat, err)
			}
			r.Group = -1
			for i, sec := range r.Seconds {
				r.ToAlone = append(r.ToAlone, sec/alone[i])
			}
			r.MaxToAlone = slices.Max(r.ToAlone)
			b.log.Info("groups together", slog.Int("groups", k), slog.Duration("latency", lat), slog.Any("seconds", r.Seconds),
				slog.Float64("max_to_alone", r.MaxToAlone), slog.Float64("burns_per_second", r.BurnsPerSec))
			g.Runs = append(g.Runs, r)
		}
	}
	return g, nil
}

// groupRun starts one poller per contract (the groups first, first+1, …)
// on one fresh, migrated database, each through its own proxy adding lat
// per request (none when lat is 0: straight to the node), and times each
// group's cursor to target; every group must hold exactly burns payments.
func (b *bench) groupRun(ctx context.Context, contracts []burnContracts, first int, lat time.Duration, target uint64, burns int) (GroupRun, error) {
	// Migrated before the clock starts: the groups' time is their reading
	// and recording, not the first replica's migrations.
	const name = "bench_groups"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return GroupRun{}, err
	}
	defer dropDB(ctx, b.admin, name)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return GroupRun{}, err
	}
	defer conn.Close(ctx)
	if err := migrate(ctx, b.bin, dbURL); err != nil {
		return GroupRun{}, err
	}
	logDir, err := os.MkdirTemp("", "bench-groups-")
	if err != nil {
		return GroupRun{}, err
	}
	var (
		replicas replicaSet
		proxies  []*rpcfault.Proxy
	)
	defer func() {
		replicas.stop()
		for _, p := range proxies {
			_ = p.Close()
		}
	}()
	ids := make([]string, len(contracts))
	nodeCPU := b.nodeCPU()
	// The bench's own CPU: the latency proxies (which decode and re-encode
	// every reply to cap eth_getLogs) and the sampling of the cursors.
	benchCPU := harness.CPUSeconds(os.Getpid())
	start := time.Now()
	for i, c := range contracts {
		url := b.info.RPCURL
		if lat > 0 {
			p, err := rpcfault.Start(b.info.RPCURL)
			if err != nil {
				return GroupRun{}, err
			}
			p.Set(func(f *rpcfault.Faults) { f.Latency, f.RangeLimit = lat, b.groupCap })
			proxies = append(proxies, p)
			url = p.URL
		}
		ids[i] = "group-" + strconv.Itoa(first+i)
		r, err := b.startReplicaOn(url, c.burn, dbURL, logDir, ids[i], "POLL_INTERVAL=200ms", "CURSOR_ID="+ids[i])
		if err != nil {
			return GroupRun{}, err
		}
		replicas = append(replicas, r)
	}
	run := GroupRun{LatencyMs: lat.Milliseconds(), Groups: len(contracts), Seconds: make([]float64, len(contracts))}
	deadline := time.Now().Add(20 * time.Minute)
	for left := len(contracts); left > 0; {
		cursors, err := groupCursors(ctx, conn)
		if err != nil {
			return GroupRun{}, err
		}
		for i, id := range ids {
			if c, ok := cursors[id]; ok && run.Seconds[i] == 0 && c >= int64(target) {
				run.Seconds[i] = time.Since(start).Seconds()
				left--
			}
		}
		for _, r := range replicas {
			if r.Exited() {
				return GroupRun{}, fmt.Errorf("%s exited (logs in %s)", r.Name(), logDir)
			}
		}
		if time.Now().After(deadline) {
			return GroupRun{}, fmt.Errorf("groups not caught up within 20 minutes (logs in %s)", logDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, c := range contracts {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments WHERE contract = $1`, strings.ToLower(c.burn.Hex())).Scan(&n); err != nil {
			return GroupRun{}, err
		}
		if n != burns {
			return GroupRun{}, fmt.Errorf("group %s recorded %d payments, want %d", ids[i], n, burns)
		}
	}
	run.CPUSeconds = b.serverCPU(ctx, conn, nodeCPU)
	for _, r := range replicas {
		run.CPUSeconds["pollers"] += harness.CPUSeconds(r.Pid())
	}
	run.CPUSeconds["bench"] = harness.CPUSeconds(os.Getpid()) - benchCPU
	for _, p := range proxies {
		run.Requests = append(run.Requests, p.Stats().Requests)
	}
	run.BurnsPerSec = float64(burns*len(contracts)) / slices.Max(run.Seconds)
	_ = os.RemoveAll(logDir)
	return run, nil
}

// parseCounts reads "1,2,4,8".
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-groups %q: want positive counts, comma-separated", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-groups: no count")
	}
	return out, nil
}
