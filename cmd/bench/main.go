// Command bench measures burnpoller against ceilings read without its code:
// the node (raw eth_getLogs and eth_getBlockReceipts) and Postgres (COPY
// into the ledger's tables), and against Ponder. Every figure names its
// node: sim (go-ethereum's simulated backend in this process), geth
// (`geth --dev`, its own process) or anvil (its own process).
//
//	go run ./cmd/bench -burns 100000 -out bench.json            # sim: every phase
//	go run ./cmd/bench -dense-node geth,anvil -burns 100000     # real nodes: ceilings, catch-up, Ponder
//	go run ./cmd/bench -groups-only                             # many groups on one database
//	go run ./cmd/bench -multigroup-only                         # many chains, one deployment (GROUPS)
//	go run ./cmd/bench -still-only                              # a head standing still: calls an hour
//
// Postgres comes from -database (an admin URL); each phase uses a fresh
// database on it.
//
// It is the tool behind `make bench-*` (docs/benchmarks.md names each
// target's phase). Each phase lives in its own file: sim.go (`make bench`,
// every phase on sim), ceilings.go (node, Postgres, both together),
// catchup.go (1 and 3 replicas, failover under load), backfill.go,
// steady.go and latency.go (head-to-row latency, failover when caught up),
// seen.go, idle.go, sparse.go, trust.go (receipts and quorum on and off),
// realdense.go (the dense run on a real node), raw.go (the node's raw
// ceilings), ponder.go (Ponder on the same chain), groups.go (many
// groups), cost.go and costfollowers.go (what following a live chain costs
// at the provider, beside Ponder), still.go (what a head standing still
// costs), multigroup.go, multigroup_runs.go and multigroup_deploy.go (many
// chains, one deployment) and upgrade.go (a ledger of real size migrated
// while replicas record).
//
// They share one harness: seed.go fills the simulated chain, node.go
// starts a real node, rpcseed.go fills it over JSON-RPC and live.go keeps
// burns trickling into one sealing on its own clock; databases.go makes
// each run's database; replicas.go starts and scrapes the poller processes
// (through internal/harness, as the integration tests do); events.go reads
// payment_events as a consumer does; sampling.go reads where the CPU and
// memory went; results.go and summary.go are the JSON document and its
// short text.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
)

type options struct {
	denseReplicas int
	database      string
	burns         int
	perTx         int
	txsPerBlock   int
	steady        time.Duration
	steadyRate    float64
	blockTime     time.Duration
	out           string
	pollerEnv     string
	seen          time.Duration
	seenOnly      bool
	trust         bool
	// The sparse first sync (sparse.go).
	sparse        bool
	sparseOnly    bool
	sparseNode    string
	sparseRuns    int
	anvil         string
	sparseBlocks  uint64
	sparseBurns   int
	sparseLatency time.Duration
	sparseCap     uint64
	// Idle RPC calls (idle.go).
	idle          time.Duration
	idleOnly      bool
	idleBlockTime time.Duration
	// The still head (still.go).
	still     time.Duration
	stillOnly bool
	// Dense runs on real nodes (realdense.go, ponder.go).
	denseNodes string
	shapes     string
	geth       string
	ponder     string
	summary    bool
	pollerBin  string
	// Many groups on one database (groups.go).
	groupsOnly    bool
	groupCounts   string
	groupBurns    int
	groupCap      uint64
	groupLatency  time.Duration
	groupsNode    string
	groupsDense   bool
	groupsLatency bool
	// What following a live chain costs at the provider (cost.go).
	costOnly      bool
	costChains    string
	costWindow    time.Duration
	costMinBlocks int
	costSettings  bool
	costWeights   string
	costCompare   string
	// Many chains, one deployment (multigroup.go).
	multiGroupOnly bool
	mgSteady       time.Duration
	mgHang         time.Duration
	mgRuns         int
	mgBacklog      int
	mgPerTx        int
	mgBlockTime    time.Duration
	mgPoll         time.Duration
	mgLatency      time.Duration
	// A ledger of real size migrated while writers record (upgrade.go).
	upgradeOnly     bool
	upgradePayments int
	upgradeHook     string
}

func main() {
	var o options
	flag.StringVar(&o.database, "database", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin URL of the Postgres to use")
	flag.IntVar(&o.burns, "burns", 100_000, "burn logs to seed (1000000 for the memory goal)")
	flag.IntVar(&o.perTx, "per-tx", 0, "burns per seeding transaction (BatchBurner.burnMany); 0: 250 on sim, 100 on a real node")
	flag.IntVar(&o.txsPerBlock, "txs-per-block", 0, "seeding transactions per block; 0: 2 on sim, 4 on a real node (400 burns a block, as users' chains)")
	flag.DurationVar(&o.steady, "steady", 60*time.Second, "length of the steady-state phase (0 skips it)")
	flag.Float64Var(&o.steadyRate, "steady-rate", 50, "burns per second in the steady state")
	flag.DurationVar(&o.blockTime, "block-time", 250*time.Millisecond, "block time in the steady state")
	flag.StringVar(&o.out, "out", "", "write the results as JSON to this file")
	flag.DurationVar(&o.seen, "seen", 30*time.Second, "length of each head-to-seen latency run, polling and with newHeads (0 skips them)")
	flag.BoolVar(&o.seenOnly, "seen-only", false, "run only the head-to-seen latency phase (no seeding)")
	flag.BoolVar(&o.trust, "trust", true, "time catch-up with receipts off and with RPC_QUORUM=2 (the node twice)")
	flag.BoolVar(&o.sparse, "sparse", true, "end the full run with the sparse first sync (its own chain, -sparse-node)")
	flag.BoolVar(&o.sparseOnly, "sparse-only", false, "run only the sparse first sync: a provider-like proxy, one replica")
	flag.StringVar(&o.sparseNode, "sparse-node", "sim", "the sparse chain's node: sim (go-ethereum's simulated backend, as devchain) or anvil (-anvil)")
	flag.IntVar(&o.sparseRuns, "sparse-runs", 1, "first syncs timed on the one seeded sparse chain, per setting")
	flag.DurationVar(&o.idle, "idle", 30*time.Second, "length of each idle RPC-call window (1 and 3 replicas, with and without RPC_WS_URL; 0 skips them)")
	flag.BoolVar(&o.idleOnly, "idle-only", false, "run only the idle RPC-call phase (no seeding)")
	flag.DurationVar(&o.idleBlockTime, "idle-block-time", 2*time.Second, "block time while idle")
	flag.DurationVar(&o.still, "still", 3*time.Minute, "with -still-only: length of each counting window of a still head (cursor below the head, cursor at it)")
	flag.BoolVar(&o.stillOnly, "still-only", false, "run only the still-head phase: one replica at the defaults behind a proxy holding the head while the node finalizes past it, every call counted by method")
	flag.StringVar(&o.anvil, "anvil", "node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil", "the anvil binary (npm @foundry-rs/anvil-linux-amd64)")
	flag.Uint64Var(&o.sparseBlocks, "sparse-blocks", 300_000, "blocks of the sparse chain")
	flag.IntVar(&o.sparseBurns, "sparse-burns", 3000, "burns on the sparse chain, one per block, spread evenly")
	flag.DurationVar(&o.sparseLatency, "sparse-latency", 80*time.Millisecond, "the proxy's added latency per request")
	flag.Uint64Var(&o.sparseCap, "sparse-cap", 10_000, "the proxy's eth_getLogs block cap (Alchemy's reply and suggested range)")
	flag.StringVar(&o.denseNodes, "dense-node", nodeSim, "the dense workload's node: sim (in-process, with every other phase), or geth or anvil as their own process (comma-separated for several), each with its ceilings and the default and VERIFY_RECEIPTS=false catch-ups only")
	flag.StringVar(&o.shapes, "shape", shapeEven, "with a real node: the dense chains' shapes, comma-separated: even (-per-tx × -txs-per-block burns in every block) or uneven (blocks of 100 to 3,100 burns, as users' chains: issue 30)")
	flag.StringVar(&o.geth, "geth", "bin/tools/geth-"+gethVersion+"/geth", "the geth binary (go install github.com/ethereum/go-ethereum/cmd/geth@"+gethVersion+")")
	flag.StringVar(&o.ponder, "ponder", "", "with a real node: also time Ponder on the same chain, its project (npm install done) in this directory")
	flag.BoolVar(&o.summary, "summary", false, "print a short table of the real-node runs instead of the JSON (which -out still writes)")
	flag.StringVar(&o.pollerBin, "poller", "", "a poller binary to run instead of building this tree's (paired runs: the code before a change against after)")
	flag.BoolVar(&o.groupsOnly, "groups-only", false, "run only the many-groups phase: groups catching up together on one database, each against its time alone")
	flag.StringVar(&o.groupCounts, "groups", "1,2,4,8", "group counts of the many-groups phase")
	flag.IntVar(&o.groupBurns, "group-burns", 3000, "burns per group")
	flag.Uint64Var(&o.groupCap, "group-cap", 10, "the latency proxy's eth_getLogs block cap (a provider's limit; 0: none), so that a group's catch-up is round trips rather than CPU")
	flag.DurationVar(&o.groupLatency, "group-latency", 80*time.Millisecond, "latency the proxy in front of each group adds per request")
	flag.StringVar(&o.groupsNode, "groups-node", nodeGeth, "the many-groups phase's node: geth or anvil")
	flag.BoolVar(&o.groupsLatency, "groups-latency", true, "many groups: the runs through the latency proxies")
	flag.BoolVar(&o.groupsDense, "groups-dense", true, "many groups: the same runs straight to the node")
	flag.BoolVar(&o.costOnly, "cost-only", false, "run only the cost phase: burnpoller and Ponder following live chains (-cost-chains), every call counted by method at a proxy")
	flag.StringVar(&o.costChains, "cost-chains", "anvil-2s,anvil-12s,geth-2s", "the cost phase's chains, of "+costChainNames())
	flag.DurationVar(&o.costWindow, "cost-window", 120*time.Second, "the cost phase's counting window on each chain (at least -cost-min-blocks blocks)")
	flag.IntVar(&o.costMinBlocks, "cost-min-blocks", 20, "the fewest blocks a cost window spans")
	flag.BoolVar(&o.costSettings, "cost-settings", true, "the cost phase also runs one setting changed at a time (POLL_INTERVAL=1s, PENDING=false, VERIFY_RECEIPTS=false, RPC_QUORUM=2)")
	flag.StringVar(&o.costCompare, "cost-compare", "", "the cost phase also runs these poller binaries at the defaults beside the others, name=binary comma-separated (the commits before and after a change, on the same chain at once)")
	flag.StringVar(&o.costWeights, "cost-weights", "", "compute units per call, method=weight comma-separated, over the default table (Alchemy's)")
	flag.IntVar(&o.denseReplicas, "dense-replicas", 0, "with a real node: also time the default catch-up with this many replicas, each one's peak RSS recorded (3: the ordinary peak of issue 38); 0 skips it")
	flag.StringVar(&o.pollerEnv, "poller-env", "", "extra environment for the replicas, comma-separated K=V (e.g. GOMEMLIMIT=40MiB)")
	flag.BoolVar(&o.multiGroupOnly, "multigroup-only", false, "run only the many-chains phase: four groups on geth and anvil, one 3-replica deployment (GROUPS) against four 2-replica ones, and one group's node hung")
	flag.DurationVar(&o.mgSteady, "multigroup-steady", 60*time.Second, "many chains: how long each layout runs in the steady state")
	flag.DurationVar(&o.mgHang, "multigroup-hang", 60*time.Second, "many chains: how long the hung group's node hangs (and each hung or undisturbed run lasts)")
	flag.IntVar(&o.mgRuns, "multigroup-runs", 2, "many chains: undisturbed and hung runs, in turn, of each")
	flag.IntVar(&o.mgBacklog, "multigroup-backlog", 15000, "many chains: burns per group to catch up at the start of each hung or undisturbed run")
	flag.IntVar(&o.mgPerTx, "multigroup-burns", 5, "many chains: burns per group per block while burns arrive")
	flag.DurationVar(&o.mgBlockTime, "multigroup-block-time", time.Second, "many chains: block time of both nodes while burns arrive")
	flag.DurationVar(&o.mgPoll, "multigroup-poll", time.Second, "many chains: the replicas' POLL_INTERVAL")
	flag.DurationVar(&o.mgLatency, "multigroup-latency", 20*time.Millisecond, "many chains: latency each group's proxy adds per request")
	flag.BoolVar(&o.upgradeOnly, "upgrade-only", false, "run only the upgrade phase: a seeded ledger migrated from the previous release's schema to this tree's while replicas of each record on anvil")
	flag.IntVar(&o.upgradePayments, "upgrade-payments", 1_000_000, "upgrade: payments seeded, each with its event and a delivered webhook")
	flag.StringVar(&o.upgradeHook, "upgrade-hook", "SELECT pg_sleep(0.02)", "upgrade: the replicas' PAYMENT_HOOK_SQL, which each migration waits to find running (the default: range transactions of a few hundred ms, each payment credited in 20 ms)")
	flag.Parse()
	real := o.realNodes()
	if o.perTx == 0 {
		o.perTx = map[bool]int{false: 250, true: 100}[real]
	}
	if o.txsPerBlock == 0 {
		o.txsPerBlock = map[bool]int{false: 2, true: 4}[real]
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	res, err := run(context.Background(), o, log)
	if err != nil {
		log.Error("bench failed", slog.Any("err", err))
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if o.summary {
		fmt.Print(summary(res))
	} else {
		fmt.Println(string(b))
	}
	if o.out != "" {
		_ = os.MkdirAll(filepath.Dir(o.out), 0o755)
		if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
			log.Error("writing results", slog.Any("err", err))
			os.Exit(1)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// bench is what every phase of one run shares.
type bench struct {
	admin    string // -database
	bin      string // the poller, built as users run it
	chain    *devchain.Chain
	info     devchain.Info
	extraEnv []string // -poller-env
	log      *slog.Logger
	// node is the real node a dense run reads, if any.
	node *realNode
	// groupCap is the many-groups latency proxy's eth_getLogs cap.
	groupCap uint64
}

func run(ctx context.Context, o options, log *slog.Logger) (*Results, error) {
	res := &Results{Burns: o.burns, Machine: machine()}
	// The poller as users run it: no race detector.
	binDir, err := os.MkdirTemp("", "bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	bin := o.pollerBin
	if bin == "" {
		if bin, err = harness.Build(ctx, binDir, "poller", false); err != nil {
			return nil, err
		}
	}
	b := &bench{admin: o.database, bin: bin, log: log}
	if o.pollerEnv != "" {
		b.extraEnv = strings.Split(o.pollerEnv, ",")
	}
	// The phases on nodes of their own processes, which start them.
	if p := o.alone(true, res); p != nil {
		res.Burns = 0
		return res, p.run(ctx, b)
	}
	if o.denseNodes != nodeSim {
		return res, b.denseRuns(ctx, o, res)
	}
	// The chain: seeded in-process, sealed by this program.
	res.Node = nodeSim
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: max(o.txsPerBlock, 2)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	b.chain, b.info = c, c.Info()
	if p := o.alone(false, res); p != nil {
		res.Burns = 0
		return res, p.run(ctx, b)
	}
	return res, b.simRun(ctx, o, res)
}

// alonePhase is a phase that a -…-only flag runs by itself.
type alonePhase struct {
	on bool
	// real: on nodes the phase starts as their own processes; else on
	// the sim chain.
	real bool
	run  func(ctx context.Context, b *bench) error
}

// alone is the phase on real nodes (real) or on sim that a -…-only flag
// runs by itself, keeping what it measured in res; nil if none, the first
// in this order when several are given.
func (o options) alone(real bool, res *Results) *alonePhase {
	for _, p := range []alonePhase{
		{o.groupsOnly, true, keep(&res.Groups, (*bench).groupsPhase, o)},
		{o.costOnly, true, keep(&res.Cost, (*bench).costPhase, o)},
		{o.multiGroupOnly, true, keep(&res.MultiGroup, (*bench).multiGroupPhase, o)},
		{o.upgradeOnly, true, keep(&res.Upgrade, (*bench).upgradePhase, o)},
		{o.seenOnly, false, func(ctx context.Context, b *bench) error { return b.seenPhases(ctx, o, res) }},
		{o.sparseOnly, false, func(ctx context.Context, b *bench) (err error) {
			res.SparseFloor, res.Sparse, err = b.sparsePhase(ctx, o)
			return err
		}},
		{o.idleOnly, false, keep(&res.Idle, (*bench).idlePhase, o)},
		{o.stillOnly, false, keep(&res.Still, (*bench).stillPhase, o)},
	} {
		if p.on && p.real == real {
			return &p
		}
	}
	return nil
}

// keep runs phase with o and keeps what it measured in *dst.
func keep[T any](dst *T, phase func(*bench, context.Context, options) (T, error), o options) func(context.Context, *bench) error {
	return func(ctx context.Context, b *bench) (err error) {
		*dst, err = phase(b, ctx, o)
		return err
	}
}

// realNodes says the run reads nodes of their own processes, not sim.
func (o options) realNodes() bool { return o.denseNodes != nodeSim || o.alone(true, &Results{}) != nil }
