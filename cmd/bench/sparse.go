package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// Sparse is a first sync of a sparse chain through a provider-like proxy.
type Sparse struct {
	Node      string  `json:"node"` // sim (go-ethereum's simulated backend) or anvil
	Run       int     `json:"run"`
	Blocks    uint64  `json:"blocks"`
	Burns     int     `json:"burns"`
	LatencyMs int64   `json:"latency_ms"`
	CapBlocks uint64  `json:"provider_cap_blocks"`
	Seconds   float64 `json:"seconds"`
	BlocksPer float64 `json:"blocks_per_second"`
	// FloorSeconds is ceil(blocks / cap) round trips one after another.
	FloorSeconds float64 `json:"floor_seconds"`
	RatioToFloor float64 `json:"ratio_to_floor"`
	// RatioToMeasuredFloor is Seconds over SparseFloor.ProxySeconds.
	RatioToMeasuredFloor float64        `json:"ratio_to_measured_floor"`
	Requests             int            `json:"http_requests"`
	Calls                map[string]int `json:"calls_by_method"`
	Rows                 int            `json:"rows"`
	Settings             []string       `json:"settings"`
}

// SparseFloor is the sparse chain read in ranges of the provider's cap, one
// after another, through a plain net/http client with no burnpoller code:
// straight from the node (what the node itself takes) and through the
// provider-like proxy (the floor: ceil(blocks / cap) round trips, measured
// rather than computed, so the node's own time is in it).
type SparseFloor struct {
	Node          string  `json:"node"`
	Blocks        uint64  `json:"blocks"`
	Calls         int     `json:"calls"`
	Logs          int     `json:"logs"`
	NodeSeconds   float64 `json:"node_alone_seconds"`
	ProxySeconds  float64 `json:"through_proxy_seconds"`
	ComputedFloor float64 `json:"computed_floor_seconds"`
	// SeedSeconds is the time to start the node and seed the chain.
	SeedSeconds float64 `json:"seed_seconds"`
}

// sparseChain is a seeded sparse chain: the node's URL, its burn contract,
// head and finalized block (fixed: nothing seals it after seeding).
type sparseChain struct {
	node      string
	url       string
	chainID   uint64
	contract  common.Address
	head      uint64
	finalized uint64
	close     func()
}

// sparsePhase seeds one sparse chain of o.sparseBlocks blocks holding
// o.sparseBurns burns (o.sparseNode: sim or anvil), measures its floor
// (SparseFloor), then times o.sparseRuns first syncs on it for each
// setting: the defaults, and VERIFY_RECEIPTS=false.
func (b *bench) sparsePhase(ctx context.Context, o options) (*SparseFloor, []*Sparse, error) {
	start := time.Now()
	sc, err := b.seedSparseChain(ctx, o)
	if err != nil {
		return nil, nil, fmt.Errorf("seeding the sparse chain: %w", err)
	}
	defer sc.close()
	seeded := time.Since(start).Seconds()
	if sc.finalized, err = finalized(ctx, sc.url); err != nil {
		return nil, nil, err
	}
	b.log.Info("sparse chain seeded", slog.String("node", sc.node), slog.Uint64("head", sc.head), slog.Uint64("finalized", sc.finalized),
		slog.Int("burns", o.sparseBurns), slog.Float64("seconds", seeded))
	floor, err := sparseFloor(ctx, o, sc)
	if err != nil {
		return nil, nil, fmt.Errorf("sparse floor: %w", err)
	}
	floor.SeedSeconds = seeded
	b.log.Info("sparse floor", slog.Float64("node_alone_seconds", floor.NodeSeconds), slog.Float64("through_proxy_seconds", floor.ProxySeconds),
		slog.Float64("computed_seconds", floor.ComputedFloor), slog.Int("calls", floor.Calls))
	var out []*Sparse
	for _, env := range [][]string{nil, {"VERIFY_RECEIPTS=false"}} {
		for run := 1; run <= max(o.sparseRuns, 1); run++ {
			sp, err := b.sparseRun(ctx, o, sc, env...)
			if err != nil {
				return nil, nil, fmt.Errorf("sparse sync %v, run %d: %w", env, run, err)
			}
			sp.Run = run
			sp.RatioToMeasuredFloor = sp.Seconds / floor.ProxySeconds
			b.log.Info("sparse first sync", slog.Any("settings", env), slog.Int("run", run), slog.Float64("seconds", sp.Seconds),
				slog.Float64("blocks_per_second", sp.BlocksPer), slog.Float64("ratio_to_floor", sp.RatioToFloor), slog.Any("calls", sp.Calls))
			out = append(out, sp)
		}
	}
	return floor, out, nil
}

// sparseFloor reads the chain up to its finalized block in ranges of the
// provider's cap, one after another, with no burnpoller code: straight from
// the node, then through a provider-like proxy as the runs meet it.
func sparseFloor(ctx context.Context, o options, sc *sparseChain) (*SparseFloor, error) {
	last := sc.finalized
	nodeSecs, calls, logs, err := rawCapped(ctx, sc.url, sc.contract, last, o.sparseCap)
	if err != nil {
		return nil, err
	}
	if logs != o.sparseBurns {
		return nil, fmt.Errorf("the node returned %d burns, %d were sent", logs, o.sparseBurns)
	}
	proxy, err := sparseProxy(o, sc)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxySecs, _, _, err := rawCapped(ctx, proxy.URL, sc.contract, last, o.sparseCap)
	if err != nil {
		return nil, err
	}
	return &SparseFloor{Node: sc.node, Blocks: last + 1, Calls: calls, Logs: logs, NodeSeconds: nodeSecs, ProxySeconds: proxySecs,
		ComputedFloor: float64(calls) * o.sparseLatency.Seconds()}, nil
}

// seedSparseChain starts the node o.sparseNode names and seeds it.
func (b *bench) seedSparseChain(ctx context.Context, o options) (*sparseChain, error) {
	switch o.sparseNode {
	case "sim":
		return seedSparseSim(ctx, o)
	case "anvil":
		return seedSparseAnvil(ctx, o)
	}
	return nil, fmt.Errorf("-sparse-node %q: want sim or anvil", o.sparseNode)
}

// seedSparseSim seeds an in-process go-ethereum simulated backend (as
// devchain, its database on disk: see devchain.Config.DataDir) with the
// sparse workload: it seals about 1,000 empty blocks a second here, where
// anvil mines 170 and slows as its chain grows.
func seedSparseSim(ctx context.Context, o options) (*sparseChain, error) {
	dir, err := os.MkdirTemp("", "bench-sparse-chain-")
	if err != nil {
		return nil, err
	}
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 1, DataDir: dir})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	closeChain := func() { _ = c.Close(); _ = os.RemoveAll(dir) }
	gap := o.sparseBlocks / uint64(o.sparseBurns+1)
	for i := range o.sparseBurns {
		for range max(gap, 1) - 1 {
			c.Seal()
		}
		digest := crypto.Keccak256Hash([]byte(fmt.Sprint("sparse", i)))
		if _, err := c.Burn(ctx, 0, big.NewInt(int64(1_000_000+i)), digest); err != nil {
			closeChain()
			return nil, fmt.Errorf("burn %d: %w", i, err)
		}
		c.Seal()
	}
	// The simulated backend's finalized block is the last multiple of 32.
	for range max(gap, 64) {
		c.Seal()
	}
	info := c.Info()
	head, err := c.Client().BlockNumber(ctx)
	if err != nil {
		closeChain()
		return nil, err
	}
	return &sparseChain{node: "sim", url: info.RPCURL, chainID: info.ChainID, contract: info.BurnContract, head: head,
		close: closeChain}, nil
}

// seedSparseAnvil starts anvil (o.anvil) as the real-node runs do and
// seeds it with the sparse workload: about o.sparseBlocks blocks holding
// o.sparseBurns burns, one a block, spread evenly (anvil_mine fills the
// gaps), then enough empty blocks for every burn to be final.
func seedSparseAnvil(ctx context.Context, o options) (_ *sparseChain, err error) {
	n, err := startNode(ctx, nodeAnvil, o.anvil, nodeOptions{})
	if err != nil {
		return nil, fmt.Errorf("starting anvil (-anvil): %w", err)
	}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	s, err := newSeeder(ctx, n)
	if err != nil {
		return nil, err
	}
	c, err := s.deployBurner(ctx)
	if err != nil {
		return nil, err
	}
	gap := o.sparseBlocks / uint64(o.sparseBurns+1)
	for i := range o.sparseBurns {
		if gap > 1 {
			if err := s.emptyBlocks(ctx, int(gap-1)); err != nil {
				return nil, err
			}
		}
		tx, err := s.burnTx(c.batch, 1)
		if err == nil {
			_, err = s.block(ctx, []*types.Transaction{tx})
		}
		if err != nil {
			return nil, fmt.Errorf("burn %d: %w", i, err)
		}
	}
	// Past finalized (head - 2 × 4 slots) with room to spare.
	if err := s.emptyBlocks(ctx, int(max(gap, 64))); err != nil {
		return nil, err
	}
	head, err := n.eth.BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	return &sparseChain{node: nodeAnvil, url: n.url, chainID: n.chainID, contract: c.burn, head: head, close: n.close}, nil
}

// sparseRun times one replica's `poller run --until-finalized` from an
// empty ledger through a fresh sparseProxy, and checks the ledger is exact.
func (b *bench) sparseRun(ctx context.Context, o options, sc *sparseChain, env ...string) (*Sparse, error) {
	dir, err := os.MkdirTemp("", "bench-sparse-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	proxy, err := sparseProxy(o, sc)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()

	name := "bench_sparse"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, b.admin, name)
	httpAddr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	runEnv := harness.PollerEnv(harness.Target{DatabaseURL: dbURL, RPCURL: proxy.URL, ChainID: sc.chainID, Contract: sc.contract, HTTPAddr: httpAddr.String()},
		env...)
	logName := fmt.Sprintf("sparse-%s-%d-%s", sc.node, time.Now().UnixNano(), strings.Join(env, "_"))
	start := time.Now()
	p, err := startPoller(b.bin, []string{"run", "--until-finalized"}, runEnv, dir, logName, httpAddr.String())
	if err != nil {
		return nil, err
	}
	code, err := p.Wait(10 * time.Minute)
	took := time.Since(start)
	if err != nil || code != 0 {
		_, _ = p.Stop(5 * time.Second)
		out, _ := os.ReadFile(filepath.Join(dir, logName+".log"))
		return nil, fmt.Errorf("poller run: exit %d, %w\n%s", code, err, lastLines(string(out)))
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var rows int
	var cursor int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM payments), (SELECT max(last_processed_block) FROM block_cursors)`).Scan(&rows, &cursor); err != nil {
		return nil, err
	}
	st := proxy.Stats()
	blocks := uint64(cursor) + 1
	floor := float64((blocks+o.sparseCap-1)/o.sparseCap) * o.sparseLatency.Seconds()
	return &Sparse{
		Node: sc.node, Blocks: blocks, Burns: o.sparseBurns, LatencyMs: o.sparseLatency.Milliseconds(), CapBlocks: o.sparseCap,
		Seconds: took.Seconds(), BlocksPer: float64(blocks) / took.Seconds(),
		FloorSeconds: floor, RatioToFloor: took.Seconds() / floor,
		Requests: st.Requests, Calls: st.Calls, Rows: rows, Settings: env,
	}, checkSparse(sc, cursor, rows, o.sparseBurns)
}

// checkSparse holds a first sync to exactness: every burn recorded once and
// the cursor at or past the chain's finalized block.
func checkSparse(sc *sparseChain, cursor int64, rows, burns int) error {
	if rows != burns {
		return fmt.Errorf("sparse sync recorded %d rows, %d burns were sent (cursor %d, finalized %d)", rows, burns, cursor, sc.finalized)
	}
	if cursor < 0 || uint64(cursor) < sc.finalized {
		return fmt.Errorf("sparse sync stopped at block %d, short of the finalized block %d", cursor, sc.finalized)
	}
	return nil
}

// lastLines is the last 20 lines of s: the end of a failed process's log.
func lastLines(s string) string {
	const n = 20
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sparseProxy is a provider-like proxy in front of sc's node: it adds
// o.sparseLatency to every request and refuses eth_getLogs over
// o.sparseCap blocks with Alchemy's words and suggested range.
func sparseProxy(o options, sc *sparseChain) (*rpcfault.Proxy, error) {
	proxy, err := rpcfault.Start(sc.url)
	if err != nil {
		return nil, err
	}
	proxy.Set(func(f *rpcfault.Faults) {
		f.Latency = o.sparseLatency
		f.RangeLimit, f.RangeStyle = o.sparseCap, rpcfault.StyleAlchemy
	})
	return proxy, nil
}
