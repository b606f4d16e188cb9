package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// What the runs of the many-chains phase (multigroup_runs.go) share: the
// traffic sealed on both nodes, the deployments, and what the runs watch
// (head to seen, the pollers' sessions on the database).

// sealTraffic seals, every blockTime on each node until ctx ends, a block
// holding one burnMany of perTx burns per group of the node, and notes
// when it was sealed.
func sealTraffic(ctx context.Context, nodes []*mgNode, groups []*mgGroup, blockTime time.Duration, perTx int, log *slog.Logger) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { each(ctx, blockTime, func() { n.sealTraffic(ctx, groups, perTx, log) }) })
	}
	return &wg
}

// sealTraffic seals a block holding one burnMany of perTx burns per group
// of the node, and notes when it was sealed.
func (n *mgNode) sealTraffic(ctx context.Context, groups []*mgGroup, perTx int, log *slog.Logger) {
	n.mu.Lock()
	var txs []*types.Transaction
	for _, g := range groups {
		if g.node != n {
			continue
		}
		tx, err := n.s.burnTx(g.c.batch, perTx)
		if err != nil {
			log.Warn("traffic", slog.Any("err", err))
			continue
		}
		txs = append(txs, tx)
	}
	block, err := n.s.block(ctx, txs)
	n.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("traffic", slog.Any("err", err))
		}
		// Nonces sent but not sealed: start again from the node's.
		n.mu.Lock()
		if nonce, err := n.n.eth.PendingNonceAt(context.WithoutCancel(ctx), n.s.from); err == nil {
			n.s.nonce = nonce
		}
		n.mu.Unlock()
		return
	}
	n.sealed.Store(block, time.Now())
}

// nodesOf are the distinct nodes of groups.
func nodesOf(groups []*mgGroup) []*mgNode {
	var out []*mgNode
	for _, g := range groups {
		if !slices.Contains(out, g.node) {
			out = append(out, g.node)
		}
	}
	return out
}

// startFromHead sets each group's START_BLOCK to its node's next block.
func startFromHead(ctx context.Context, groups []*mgGroup) error {
	for _, g := range groups {
		head, err := g.node.n.eth.BlockNumber(ctx)
		if err != nil {
			return err
		}
		g.start = head + 1
	}
	return nil
}

// deployment is replicas of one layout on one database.
type deployment struct {
	replicas replicaSet
	env      [][]string
	logDir   string
}

// startOne starts the one deployment: n replicas serving every group.
func (b *bench) startOne(dbURL string, groups []*mgGroup, n int, o options) (*deployment, error) {
	d := &deployment{}
	var err error
	if d.logDir, err = os.MkdirTemp("", "bench-multigroup-"); err != nil {
		return nil, err
	}
	targets := make([]harness.Group, len(groups))
	settings := []string{"POLL_INTERVAL=" + o.mgPoll.String()}
	for i, g := range groups {
		targets[i] = harness.Group{Name: g.name, RPCURL: g.proxy.URL, ChainID: g.node.n.chainID, Contract: g.c.burn}
		p := strings.ToUpper(g.name) + "_"
		settings = append(settings, fmt.Sprintf("%sSTART_BLOCK=%d", p, g.start), p+"RPC_WS_URL="+g.node.n.wsURL)
	}
	for i := range n {
		addr, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		env := harness.GroupsEnv(dbURL, addr.String(), targets, slices.Concat(settings, b.extraEnv)...)
		r, err := startPoller(b.bin, []string{"run"}, env, d.logDir, fmt.Sprintf("replica-%d", i), addr.String())
		if err != nil {
			d.stop()
			return nil, err
		}
		d.replicas, d.env = append(d.replicas, r), append(d.env, env)
	}
	return d, nil
}

// startPerGroup starts a deployment of n replicas for each group.
func (b *bench) startPerGroup(dbURL string, groups []*mgGroup, n int, o options) (*deployment, error) {
	d := &deployment{}
	var err error
	if d.logDir, err = os.MkdirTemp("", "bench-multigroup-"); err != nil {
		return nil, err
	}
	for _, g := range groups {
		for i := range n {
			addr, err := harness.FreeAddr()
			if err != nil {
				return nil, err
			}
			env := harness.PollerEnv(harness.Target{DatabaseURL: dbURL, RPCURL: g.proxy.URL, ChainID: g.node.n.chainID, Contract: g.c.burn,
				HTTPAddr: addr.String()}, slices.Concat([]string{"POLL_INTERVAL=" + o.mgPoll.String(), fmt.Sprintf("START_BLOCK=%d", g.start),
				"RPC_WS_URL=" + g.node.n.wsURL}, b.extraEnv)...)
			r, err := startPoller(b.bin, []string{"run"}, env, d.logDir, fmt.Sprintf("%s-%d", g.name, i), addr.String())
			if err != nil {
				d.stop()
				return nil, err
			}
			d.replicas, d.env = append(d.replicas, r), append(d.env, env)
		}
	}
	return d, nil
}

// stop stops every replica of the deployment, all at once.
func (d *deployment) stop() { d.replicas.stop() }

// ready waits until every replica answers /readyz with 200.
func (d *deployment) ready(ctx context.Context) error {
	for _, r := range d.replicas {
		if err := harness.WaitFor(ctx, 2*time.Minute, r.Name()+" ready", func() bool {
			return r.Exited() || answers200(ctx, "http://"+r.addr+"/readyz")
		}); err != nil {
			return fmt.Errorf("%w (logs in %s)", err, d.logDir)
		}
		if r.Exited() {
			return fmt.Errorf("%s exited (logs in %s)", r.Name(), d.logDir)
		}
	}
	return nil
}

// seenWatch notes, per group, the head-to-seen latency of every seen event
// of a block this run's traffic sealed, as watchEvents reads them; count
// says which of them a run keeps (the blocks sealed once it measures).
type seenWatch struct {
	mu  sync.Mutex
	lat map[string][]float64
}

func watchSeen(ctx context.Context, dbURL string, groups []*mgGroup, count func(g *mgGroup, sealed time.Time) bool) (*seenWatch, func(), error) {
	byKey := map[string]*mgGroup{}
	for _, g := range groups {
		byKey[fmt.Sprintf("%d/%s", g.node.n.chainID, strings.ToLower(g.c.burn.Hex()))] = g
	}
	w := &seenWatch{lat: map[string][]float64{}}
	wait, err := watchEvents(ctx, dbURL, func(e event, at time.Time) {
		g := byKey[fmt.Sprintf("%d/%s", e.chainID, e.contract)]
		if e.kind != "seen" || g == nil {
			return
		}
		v, ok := g.node.sealed.Load(uint64(e.block))
		if !ok || !count(g, v.(time.Time)) {
			return
		}
		w.mu.Lock()
		w.lat[g.name] = append(w.lat[g.name], float64(at.Sub(v.(time.Time)).Milliseconds()))
		w.mu.Unlock()
	})
	return w, wait, err
}

// sampleConnections counts the pollers' sessions on dbName every 250 ms
// until ctx ends.
func sampleConnections(ctx context.Context, admin, dbName string) (peak func() int, mean func() float64, wg *sync.WaitGroup, err error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		mu         sync.Mutex
		top, n     int
		sum        float64
		samplesRun sync.WaitGroup
	)
	samplesRun.Go(func() {
		defer conn.Close(context.WithoutCancel(ctx))
		for ctx.Err() == nil {
			var c int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'burnpoller%'`, dbName).Scan(&c); err == nil {
				mu.Lock()
				top, sum, n = max(top, c), sum+float64(c), n+1
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return top },
		func() float64 { mu.Lock(); defer mu.Unlock(); return sum / float64(max(n, 1)) }, &samplesRun, nil
}
