package main

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/contracts/bindings"
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

// anvilKey is anvil's first dev account (publicly known).
const anvilKey = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

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
	proxy, err := rpcfault.Start(sc.url)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.Set(func(f *rpcfault.Faults) {
		f.Latency = o.sparseLatency
		f.RangeLimit, f.RangeStyle = o.sparseCap, rpcfault.StyleAlchemy
	})
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

// seedSparseAnvil starts anvil (o.anvil) and seeds it with the sparse
// workload.
func seedSparseAnvil(ctx context.Context, o options) (_ *sparseChain, err error) {
	dir, err := os.MkdirTemp("", "bench-anvil-")
	if err != nil {
		return nil, err
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	anvil := exec.CommandContext(ctx, o.anvil, "--host", "127.0.0.1", "--port", fmt.Sprint(addr.Port), "--prune-history",
		"--slots-in-an-epoch", "4", "--silent")
	anvil.Env = append(os.Environ(), "HOME="+dir) // anvil writes under ~/.foundry
	if err := anvil.Start(); err != nil {
		return nil, fmt.Errorf("starting anvil (%s; -anvil): %w", o.anvil, err)
	}
	stop := func() { _ = anvil.Process.Kill(); _ = anvil.Wait(); _ = os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			stop()
		}
	}()
	url := "http://" + addr.String()
	var c *ethclient.Client
	for i := 0; ; i++ {
		if c, err = ethclient.DialContext(ctx, url); err == nil {
			if _, err = c.ChainID(ctx); err == nil {
				break
			}
			c.Close()
		}
		if i > 100 {
			return nil, fmt.Errorf("anvil does not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c.Close()
	burnAddr, err := seedSparse(ctx, c, o.sparseBlocks, o.sparseBurns)
	if err != nil {
		return nil, err
	}
	head, err := c.BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	chainID, err := c.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	return &sparseChain{node: "anvil", url: url, chainID: chainID.Uint64(), contract: burnAddr, head: head, close: stop}, nil
}

// sparseRun times one replica's `poller run --until-finalized` from an
// empty ledger through a fresh proxy that adds o.sparseLatency to every
// request and refuses eth_getLogs over o.sparseCap blocks with Alchemy's
// words and suggested range, and checks the ledger is exact.
func (b *bench) sparseRun(ctx context.Context, o options, sc *sparseChain, env ...string) (*Sparse, error) {
	dir, err := os.MkdirTemp("", "bench-sparse-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	proxy, err := rpcfault.Start(sc.url)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.Set(func(f *rpcfault.Faults) {
		f.Latency = o.sparseLatency
		f.RangeLimit, f.RangeStyle = o.sparseCap, rpcfault.StyleAlchemy
	})

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
	runEnv := append([]string{
		"DATABASE_URL=" + dbURL, "RPC_URL=" + proxy.URL, "CHAIN_ID=" + strconv.FormatUint(sc.chainID, 10),
		"BURN_CONTRACT=" + sc.contract.Hex(), "HTTP_ADDR=" + httpAddr.String(), "LOG_FORMAT=json",
	}, env...)
	logFile := filepath.Join(dir, fmt.Sprintf("sparse-%s-%d-%s.log", sc.node, time.Now().UnixNano(), strings.Join(env, "_")))
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	start := time.Now()
	p, err := harness.Start(harness.Spec{Name: "sparse", Bin: b.bin, Args: []string{"run", "--until-finalized"},
		Env: runEnv, Stdout: f, Stderr: f})
	if err != nil {
		return nil, err
	}
	code, err := p.Wait(10 * time.Minute)
	took := time.Since(start)
	if err != nil || code != 0 {
		_, _ = p.Stop(5 * time.Second)
		out, _ := os.ReadFile(logFile)
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

// seedSparse deploys the token and the burn contract on anvil and makes a
// chain of about blocks blocks with burns burns, one per block, spread
// evenly (anvil_mine fills the gaps), then enough empty blocks for every
// burn to be final. It returns the burn contract.
func seedSparse(ctx context.Context, c *ethclient.Client, blocks uint64, burns int) (common.Address, error) {
	key, _ := crypto.HexToECDSA(anvilKey)
	chainID, err := c.ChainID(ctx)
	if err != nil {
		return common.Address{}, err
	}
	opts := func(k *ecdsa.PrivateKey) *bind.TransactOpts { return bind.NewKeyedTransactor(k, chainID) }
	wait := func(tx interface{ Hash() common.Hash }, err error) error {
		if err != nil {
			return err
		}
		_, err = bind.WaitMined(ctx, c, tx.Hash())
		return err
	}
	tokenAddr, tx, token, err := bindings.DeployTestToken(opts(key), c)
	if err := wait(tx, err); err != nil {
		return common.Address{}, err
	}
	burnAddr, tx, burner, err := bindings.DeployBurnWithDigest(opts(key), c, tokenAddr)
	if err := wait(tx, err); err != nil {
		return common.Address{}, err
	}
	me := crypto.PubkeyToAddress(key.PublicKey)
	lots := new(big.Int).Lsh(big.NewInt(1), 200)
	if err := wait(token.Mint(opts(key), me, lots)); err != nil {
		return common.Address{}, err
	}
	if err := wait(token.Approve(opts(key), burnAddr, lots)); err != nil {
		return common.Address{}, err
	}
	gap := blocks / uint64(burns+1)
	for i := range burns {
		if gap > 1 {
			if err := c.Client().CallContext(ctx, nil, "anvil_mine", hexutil.Uint64(gap-1)); err != nil {
				return common.Address{}, err
			}
		}
		var digest [32]byte
		copy(digest[:], crypto.Keccak256([]byte(fmt.Sprint("sparse", i))))
		// anvil mines each transaction as it arrives (automine): no wait.
		if _, err := burner.BurnWithDigest(opts(key), big.NewInt(int64(1_000_000+i)), digest); err != nil {
			return common.Address{}, fmt.Errorf("burn %d: %w", i, err)
		}
	}
	// Past finalized (head - 2 × 4 slots) with room to spare.
	return burnAddr, c.Client().CallContext(ctx, nil, "anvil_mine", hexutil.Uint64(max(gap, 64)))
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
