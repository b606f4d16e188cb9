package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// The runs of the many-chains phase (multigroup.go): the layouts, the
// shares over time, and the hung and undisturbed runs.

// layoutRun runs one layout (one: a 3-replica deployment with GROUPS;
// else four 2-replica deployments) for -multigroup-steady from the head,
// burns arriving, and measures its connections and memory.
func (b *bench) layoutRun(ctx context.Context, o options, groups []*mgGroup, one bool) (LayoutRun, error) {
	lr := LayoutRun{Name: "four deployments of 2 replicas, one per group", Seconds: o.mgSteady.Seconds()}
	if one {
		lr.Name = "one deployment of 3 replicas, GROUPS"
	}
	const dbName = "bench_multigroup"
	dbURL, err := b.mgLedger(ctx, dbName, groups)
	if err != nil {
		return lr, err
	}
	defer dropDB(ctx, b.admin, dbName)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	tr := sealTraffic(runCtx, nodesOf(groups), groups, o.mgBlockTime, o.mgPerTx, b.log)
	defer func() { stop(); tr.Wait() }()
	var d *deployment
	if one {
		d, err = b.startOne(dbURL, groups, 3, o)
	} else {
		d, err = b.startPerGroup(dbURL, groups, 2, o)
	}
	if err != nil {
		return lr, err
	}
	defer d.stop()
	if err := d.ready(ctx); err != nil {
		return lr, err
	}
	started := time.Now()
	seen, seenWait, err := watchSeen(runCtx, dbURL, groups, func(_ *mgGroup, sealed time.Time) bool { return sealed.After(started) })
	if err != nil {
		return lr, err
	}
	peak, mean, sampling, err := sampleConnections(runCtx, b.admin, dbName)
	if err != nil {
		return lr, err
	}
	time.Sleep(o.mgSteady)
	for _, r := range d.replicas {
		lr.RSSMiB += rssMiB(r.Pid())
		p := peakRSSMiB(r.Proc)
		lr.PeakRSSMiB += p
		lr.PeakRSSEach = append(lr.PeakRSSEach, p)
		lr.CPUSeconds += harness.CPUSeconds(r.Pid())
	}
	lr.RSSMiB = math.Round(lr.RSSMiB*10) / 10
	lr.Processes = len(d.replicas)
	stop()
	sampling.Wait()
	seenWait()
	lr.ConnectionsPeak, lr.ConnectionsMean = peak(), math.Round(mean()*10)/10
	var all []float64
	for _, xs := range seen.lat {
		all = append(all, xs...)
	}
	lr.SeenP50Ms, lr.SeenP90Ms = quantile(all, 50), quantile(all, 90)
	_ = os.RemoveAll(d.logDir)
	return lr, nil
}

// mgLedger creates the database dbName afresh and migrates it, before any
// replica starts, and sets each group's START_BLOCK to its node's next
// block: a run from the head. The caller drops the database.
func (b *bench) mgLedger(ctx context.Context, dbName string, groups []*mgGroup) (string, error) {
	dbURL, err := freshDB(ctx, b.admin, dbName)
	if err != nil {
		return "", err
	}
	err = migrate(ctx, b.bin, dbURL)
	if err == nil {
		err = startFromHead(ctx, groups)
	}
	if err != nil {
		dropDB(ctx, b.admin, dbName)
		return "", err
	}
	return dbURL, nil
}

// sharesRun runs the one deployment for -multigroup-steady + 30 s from the
// head, kills replica 0 a third in and starts it again two thirds in, and
// samples each replica's reads and lock of each group by window.
func (b *bench) sharesRun(ctx context.Context, o options, groups []*mgGroup) ([]ShareWindow, map[string]Takeover, float64, float64, error) {
	const dbName = "bench_multigroup_shares"
	dbURL, err := b.mgLedger(ctx, dbName, groups)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	defer dropDB(ctx, b.admin, dbName)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	tr := sealTraffic(runCtx, nodesOf(groups), groups, o.mgBlockTime, o.mgPerTx, b.log)
	defer func() { stop(); tr.Wait() }()
	d, err := b.startOne(dbURL, groups, 3, o)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	defer func() { d.stop() }()
	if err := d.ready(ctx); err != nil {
		return nil, nil, 0, 0, err
	}
	total := o.mgSteady + 30*time.Second
	killAt, backAt := total/3, 2*total/3
	const window = 5 * time.Second
	const sample = 250 * time.Millisecond
	var (
		windows   []ShareWindow
		start     = time.Now()
		killed    bool
		back      bool
		takeovers func() map[string]Takeover
	)
	reads := func(r *replica, g *mgGroup) float64 {
		sfx := fmt.Sprintf(`{group=%q,result=`, g.name)
		return metric(ctx, r.addr, "burnpoller_polls_total"+sfx+`"committed"}`) + metric(ctx, r.addr, "burnpoller_polls_total"+sfx+`"idle"}`)
	}
	before := map[string][]float64{}
	snapshot := func() {
		for _, g := range groups {
			before[g.name] = make([]float64, len(d.replicas))
			for i, r := range d.replicas {
				before[g.name][i] = reads(r, g)
			}
		}
	}
	snapshot()
	for time.Since(start) < total {
		w := ShareWindow{FromSec: time.Since(start).Seconds(), Reads: map[string][]float64{}, LockHeld: map[string][]float64{}}
		held := map[string][]float64{}
		samples := 0
		for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(sample) {
			samples++
			for _, g := range groups {
				if held[g.name] == nil {
					held[g.name] = make([]float64, len(d.replicas))
				}
				for i, r := range d.replicas {
					if metric(ctx, r.addr, fmt.Sprintf(`burnpoller_lock_held{group=%q}`, g.name)) == 1 {
						held[g.name][i]++
					}
				}
			}
			switch el := time.Since(start); {
			case !killed && el >= killAt:
				killed = true
				var held []*mgGroup
				if len(windows) > 0 {
					for _, g := range groups {
						if windows[len(windows)-1].Reads[g.name][0] > 0 {
							held = append(held, g)
						}
					}
				}
				_ = d.replicas[0].Signal(os.Kill)
				takeovers = watchTakeover(ctx, dbURL, held)
				_, _ = d.replicas[0].Wait(10 * time.Second)
			case killed && !back && el >= backAt:
				back = true
				r, err := startPoller(b.bin, []string{"run"}, d.env[0], d.logDir, "replica-0.1", d.replicas[0].addr)
				if err != nil {
					return nil, nil, 0, 0, err
				}
				d.replicas[0] = r
			}
		}
		w.ToSec = time.Since(start).Seconds()
		w.Holding = make([]int, len(d.replicas))
		for _, g := range groups {
			w.Reads[g.name] = make([]float64, len(d.replicas))
			w.LockHeld[g.name] = make([]float64, len(d.replicas))
			for i, r := range d.replicas {
				n := max(reads(r, g)-before[g.name][i], 0)
				if r.Exited() {
					n = 0
				}
				w.Reads[g.name][i] = n
				w.LockHeld[g.name][i] = math.Round(held[g.name][i]/float64(samples)*100) / 100
				if n > 0 {
					w.Holding[i]++
				}
			}
		}
		snapshot()
		windows = append(windows, w)
		b.log.Info("shares", slog.Float64("from", w.FromSec), slog.Any("groups_read_per_replica", w.Holding))
	}
	_ = os.RemoveAll(d.logDir)
	var took map[string]Takeover
	if takeovers != nil {
		took = takeovers()
	}
	return windows, took, killAt.Seconds(), backAt.Seconds(), nil
}

// Takeover is how long a group the killed replica held went unread: from
// its last read before the kill, and from the kill, to the first read
// after it (a read at the target, or a range committed), by the
// database's clock.
type Takeover struct {
	SinceLastRead float64 `json:"seconds_since_last_read"`
	SinceKill     float64 `json:"seconds_since_kill"`
}

// watchTakeover notes, from now (the kill), when each of groups is next
// read; the function it returns waits up to 30 s for them all.
func watchTakeover(ctx context.Context, dbURL string, groups []*mgGroup) func() map[string]Takeover {
	out := map[string]Takeover{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		read := `SELECT extract(epoch FROM greatest(polled_at, updated_at))::float8, extract(epoch FROM clock_timestamp())::float8
			FROM block_cursors WHERE id = $1`
		last, kill := map[string]float64{}, 0.0
		for _, g := range groups {
			var at float64
			_ = conn.QueryRow(ctx, read, g.cursorID()).Scan(&at, &kill)
			last[g.name] = at
		}
		for deadline := time.Now().Add(30 * time.Second); len(out) < len(groups) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, g := range groups {
				var at, now float64
				if _, ok := out[g.name]; ok || conn.QueryRow(ctx, read, g.cursorID()).Scan(&at, &now) != nil || at <= last[g.name] {
					continue
				}
				out[g.name] = Takeover{SinceLastRead: at - last[g.name], SinceKill: at - kill}
			}
		}
	}()
	return func() map[string]Takeover { <-done; return out }
}

// hungRun seeds each group a backlog of -multigroup-backlog burns, starts
// the one deployment on it with burns arriving, and times each group's
// catch-up and, after it, its head-to-seen latency until -multigroup-hang
// has passed; with hung, the first group's node hangs meanwhile.
func (b *bench) hungRun(ctx context.Context, o options, groups []*mgGroup, hung bool) (HungRun, error) {
	r := HungRun{Disturbed: hung, CatchUpSeconds: map[string]float64{}, SeenP50Ms: map[string]float64{}, SeenP90Ms: map[string]float64{},
		Seen: map[string]int{}}
	const dbName = "bench_multigroup_hung"
	dbURL, err := b.mgLedger(ctx, dbName, groups)
	if err != nil {
		return r, err
	}
	defer dropDB(ctx, b.admin, dbName)
	targets := map[*mgNode]uint64{}
	for _, n := range nodesOf(groups) {
		var cs []burnContracts
		for _, g := range groups {
			if g.node == n {
				cs = append(cs, g.c)
			}
		}
		n.mu.Lock()
		seed, err := n.s.seedDense(ctx, cs, o.mgBacklog, 100, 4)
		n.mu.Unlock()
		if err != nil {
			return r, err
		}
		targets[n] = seed.Finalized
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if hung {
		groups[0].proxy.Set(func(f *rpcfault.Faults) { f.Hang = math.MaxInt32 })
		defer groups[0].proxy.Set(func(f *rpcfault.Faults) { f.Hang = 0 })
	}
	tr := sealTraffic(runCtx, nodesOf(groups), groups, o.mgBlockTime, o.mgPerTx, b.log)
	defer func() { stop(); tr.Wait() }()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return r, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	var mu sync.Mutex
	caughtAt := map[string]time.Time{}
	seen, seenWait, err := watchSeen(runCtx, dbURL, groups, func(g *mgGroup, sealed time.Time) bool {
		mu.Lock()
		defer mu.Unlock()
		at, ok := caughtAt[g.name]
		return ok && sealed.After(at)
	})
	if err != nil {
		return r, err
	}
	d, err := b.startOne(dbURL, groups, 3, o)
	if err != nil {
		return r, err
	}
	defer d.stop()
	for time.Since(start) < o.mgHang {
		cursors, err := groupCursors(ctx, conn)
		if err != nil {
			return r, err
		}
		for _, g := range groups {
			mu.Lock()
			if _, done := caughtAt[g.name]; !done && cursors[g.cursorID()] >= int64(targets[g.node]) {
				caughtAt[g.name] = time.Now()
				r.CatchUpSeconds[g.name] = time.Since(start).Seconds()
			}
			mu.Unlock()
		}
		for _, rp := range d.replicas {
			if rp.Exited() {
				return r, fmt.Errorf("%s exited (logs in %s)", rp.Name(), d.logDir)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	seenWait()
	for _, g := range groups {
		xs := seen.lat[g.name]
		r.Seen[g.name] = len(xs)
		if len(xs) > 0 {
			r.SeenP50Ms[g.name], r.SeenP90Ms[g.name] = quantile(xs, 50), quantile(xs, 90)
		}
		if _, ok := r.CatchUpSeconds[g.name]; !ok && (!hung || g != groups[0]) {
			return r, fmt.Errorf("group %s did not catch up within %s (logs in %s)", g.name, o.mgHang, d.logDir)
		}
	}
	// Every group that caught up holds exactly the chain's burns.
	for _, g := range groups {
		if _, ok := r.CatchUpSeconds[g.name]; !ok {
			continue
		}
		if err := checkLedger(ctx, conn, g, uint64(groupCursorOf(ctx, conn, g))); err != nil {
			return r, err
		}
	}
	_ = os.RemoveAll(d.logDir)
	return r, nil
}

func groupCursorOf(ctx context.Context, conn *pgx.Conn, g *mgGroup) int64 {
	var n int64
	_ = conn.QueryRow(ctx, `SELECT last_processed_block FROM block_cursors WHERE id = $1`, g.cursorID()).Scan(&n)
	return n
}

// checkLedger compares the group's payments in [start, to] with its
// chain's burns there.
func checkLedger(ctx context.Context, conn *pgx.Conn, g *mgGroup, to uint64) error {
	logs, err := g.node.n.eth.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(g.start), ToBlock: new(big.Int).SetUint64(to),
		Addresses: []common.Address{g.c.burn}, Topics: [][]common.Hash{{chain.BurnTopic}},
	})
	if err != nil {
		return err
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments WHERE chain_id = $1 AND contract = $2 AND block_number BETWEEN $3 AND $4`,
		int64(g.node.n.chainID), strings.ToLower(g.c.burn.Hex()), int64(g.start), int64(to)).Scan(&n); err != nil {
		return err
	}
	if n != len(logs) {
		return fmt.Errorf("group %s recorded %d payments in blocks %d-%d, the chain holds %d burns", g.name, n, g.start, to, len(logs))
	}
	return nil
}
