package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// MultiGroup is four groups on two real nodes (two burn contracts on geth,
// two on anvil): one 3-replica deployment serving them all (GROUPS)
// against four 2-replica deployments, one per group (connections and
// memory); each replica's share of the groups over time, a replica killed
// and back; and the others' pace while one group's node hangs for 60 s,
// against undisturbed runs (issue 31).
type MultiGroup struct {
	Nodes       []string `json:"nodes"`
	Groups      []string `json:"groups"`
	Settings    string   `json:"poller_settings"`
	LoadAtStart string   `json:"load_average_at_start"`
	// Layouts are the two deployments in the steady state, burns arriving.
	Layouts []LayoutRun `json:"layouts"`
	// Shares is the one deployment's replicas' share of the groups, by
	// window: replica 0 killed at KilledAt, started again at BackAt.
	Shares   []ShareWindow `json:"shares"`
	KilledAt float64       `json:"replica_0_killed_at_seconds"`
	BackAt   float64       `json:"replica_0_back_at_seconds"`
	// Takeover is, for each group replica 0 held when it was killed, how
	// long it went unread.
	Takeover map[string]Takeover `json:"takeover_after_the_kill"`
	// Hung is the one deployment catching up and tracking heads, with and
	// without group Hung's node hung for HungSeconds; Ratios are, per other
	// group, the medians of disturbed over undisturbed.
	HungGroup   string             `json:"hung_group"`
	HungSeconds float64            `json:"hung_seconds"`
	Hung        []HungRun          `json:"hung_runs"`
	Ratios      map[string]Ratios  `json:"hung_to_undisturbed"`
	MaxRatio    float64            `json:"max_ratio"`
	BacklogSeed map[string]float64 `json:"backlog_seed_seconds,omitempty"`
}

// LayoutRun is one deployment layout in the steady state.
type LayoutRun struct {
	Name      string  `json:"name"`
	Processes int     `json:"processes"`
	Seconds   float64 `json:"seconds"`
	// Connections are the sessions of the pollers on the database,
	// sampled every 250 ms.
	ConnectionsPeak int     `json:"connections_peak"`
	ConnectionsMean float64 `json:"connections_mean"`
	// RSS is the pollers' resident memory summed: at the end, and the sum
	// of each one's peak.
	RSSMiB      float64 `json:"rss_mib_sum_at_end"`
	PeakRSSMiB  int64   `json:"peak_rss_mib_sum"`
	PeakRSSEach []int64 `json:"peak_rss_mib_each"`
	CPUSeconds  float64 `json:"poller_cpu_seconds"`
	// SeenP50Ms is the head-to-seen latency of every group together.
	SeenP50Ms float64 `json:"head_to_seen_p50_ms"`
	SeenP90Ms float64 `json:"head_to_seen_p90_ms"`
}

// ShareWindow is, for one window of the run, each replica's reads of each
// group (polls that read the chain) and the fraction of samples in which
// it held the group's cursor lock.
type ShareWindow struct {
	FromSec  float64              `json:"from_seconds"`
	ToSec    float64              `json:"to_seconds"`
	Reads    map[string][]float64 `json:"reads"`
	LockHeld map[string][]float64 `json:"lock_held"`
	// Holding is, per replica, the groups it read in the window.
	Holding []int `json:"groups_read_per_replica"`
}

// HungRun is one run of the one deployment: each group's catch-up of its
// backlog and, after it, its head-to-seen latency.
type HungRun struct {
	Disturbed      bool               `json:"hung"`
	CatchUpSeconds map[string]float64 `json:"catch_up_seconds"`
	SeenP50Ms      map[string]float64 `json:"head_to_seen_p50_ms"`
	SeenP90Ms      map[string]float64 `json:"head_to_seen_p90_ms"`
	Seen           map[string]int     `json:"seen_events"`
}

// Ratios are a group's disturbed over undisturbed figures.
type Ratios struct {
	CatchUp float64 `json:"catch_up_seconds"`
	SeenP50 float64 `json:"head_to_seen_p50"`
	SeenP90 float64 `json:"head_to_seen_p90"`
}

// mgGroup is one group of the phase: a burn contract on a node, reached
// through a proxy of its own.
type mgGroup struct {
	name  string
	node  *mgNode
	c     burnContracts
	proxy *rpcfault.Proxy
	start uint64 // the run's START_BLOCK
}

func (g *mgGroup) cursorID() string {
	return fmt.Sprintf("%d:%s", g.node.n.chainID, strings.ToLower(g.c.burn.Hex()))
}

// mgNode is a node and the seeder that owns its nonces; traffic and
// seeding take turns through mu.
type mgNode struct {
	n  *realNode
	s  *seeder
	mu sync.Mutex
	// sealed is when each block of this run's traffic was sealed.
	sealed sync.Map // uint64 -> time.Time
}

// multiGroupPhase runs the phase: -multigroup-only.
func (b *bench) multiGroupPhase(ctx context.Context, o options) (*MultiGroup, error) {
	mg := &MultiGroup{LoadAtStart: loadAverage(), HungSeconds: o.mgHang.Seconds(),
		Settings: fmt.Sprintf("defaults; POLL_INTERVAL=%s; RPC_WS_URL to the node (newHeads); a proxy adding %s per request in front of each group's RPC_URL", o.mgPoll, o.mgLatency)}
	var groups []*mgGroup
	for _, kind := range []string{nodeGeth, nodeAnvil} {
		bin := map[string]string{nodeGeth: o.geth, nodeAnvil: o.anvil}[kind]
		n, err := startNode(ctx, kind, bin, nodeOptions{})
		if err != nil {
			return nil, err
		}
		defer n.close()
		s, err := newSeeder(ctx, n)
		if err != nil {
			return nil, err
		}
		node := &mgNode{n: n, s: s}
		mg.Nodes = append(mg.Nodes, kind)
		var warm []*types.Transaction
		for i := range 2 {
			c, err := s.deployBurner(ctx)
			if err != nil {
				return nil, err
			}

			p, err := rpcfault.Start(n.url)
			if err != nil {
				return nil, err
			}
			defer p.Close()
			p.Set(func(f *rpcfault.Faults) { f.Latency = o.mgLatency })
			g := &mgGroup{name: fmt.Sprintf("%s%d", kind, i+1), node: node, c: c, proxy: p}
			groups = append(groups, g)
			mg.Groups = append(mg.Groups, g.name)
		}
		// A first burnMany of a few burns reverts on geth within
		// burnTx's gas (its first writes to the token's zero slots cost
		// more); one of a hundred first, as seeding does, and the
		// traffic's small ones fit.
		for _, g := range groups[len(groups)-2:] {
			tx, err := s.burnTx(g.c.batch, 100)
			if err != nil {
				return nil, err
			}
			warm = append(warm, tx)
		}
		if _, err := s.block(ctx, warm); err != nil {
			return nil, fmt.Errorf("the first burns on %s: %w", kind, err)
		}
	}
	mg.HungGroup = groups[0].name

	// The layouts, in the steady state from the head.
	for _, one := range []bool{false, true} {
		lr, err := b.layoutRun(ctx, o, groups, one)
		if err != nil {
			return nil, err
		}
		b.log.Info("layout", slog.String("name", lr.Name), slog.Int("connections_peak", lr.ConnectionsPeak),
			slog.Float64("rss_mib", lr.RSSMiB), slog.Int64("peak_rss_mib", lr.PeakRSSMiB))
		mg.Layouts = append(mg.Layouts, lr)
	}
	shares, took, killed, back, err := b.sharesRun(ctx, o, groups)
	if err != nil {
		return nil, err
	}
	mg.Shares, mg.Takeover, mg.KilledAt, mg.BackAt = shares, took, killed, back

	// Undisturbed and hung runs, in turn.
	for i := range 2 * o.mgRuns {
		r, err := b.hungRun(ctx, o, groups, i%2 == 1)
		if err != nil {
			return nil, err
		}
		b.log.Info("hung run", slog.Bool("hung", r.Disturbed), slog.Any("catch_up", r.CatchUpSeconds), slog.Any("seen_p50_ms", r.SeenP50Ms))
		mg.Hung = append(mg.Hung, r)
	}
	mg.Ratios = map[string]Ratios{}
	for _, g := range groups[1:] {
		var cu, p50, p90 []float64
		ratio := func(hung, calm float64, to *[]float64) {
			if hung > 0 && calm > 0 {
				*to = append(*to, hung/calm)
			}
		}
		for i := 0; i+1 < len(mg.Hung); i += 2 {
			calm, hung := mg.Hung[i], mg.Hung[i+1]
			ratio(hung.CatchUpSeconds[g.name], calm.CatchUpSeconds[g.name], &cu)
			ratio(hung.SeenP50Ms[g.name], calm.SeenP50Ms[g.name], &p50)
			ratio(hung.SeenP90Ms[g.name], calm.SeenP90Ms[g.name], &p90)
		}
		r := Ratios{CatchUp: median(cu), SeenP50: median(p50), SeenP90: median(p90)}
		mg.Ratios[g.name] = r
		mg.MaxRatio = max(mg.MaxRatio, r.CatchUp, r.SeenP50, r.SeenP90)
	}
	return mg, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quantile is the q-th percentile of xs in ms (0 for none).
func quantile(xs []float64, q int) float64 {
	return percentile(slices.Sorted(slices.Values(xs)), q)
}
