package main

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/contracts/bindings"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// Sparse is a first sync of a sparse chain through a provider-like proxy.
type Sparse struct {
	Blocks    uint64  `json:"blocks"`
	Burns     int     `json:"burns"`
	LatencyMs int64   `json:"latency_ms"`
	CapBlocks uint64  `json:"provider_cap_blocks"`
	Seconds   float64 `json:"seconds"`
	BlocksPer float64 `json:"blocks_per_second"`
	// FloorSeconds is ceil(blocks / cap) round trips one after another.
	FloorSeconds float64        `json:"floor_seconds"`
	RatioToFloor float64        `json:"ratio_to_floor"`
	Requests     int            `json:"http_requests"`
	Calls        map[string]int `json:"calls_by_method"`
	Rows         int            `json:"rows"`
	Settings     []string       `json:"settings"`
}

// anvilKey is anvil's first dev account (publicly known).
const anvilKey = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// sparse seeds an anvil chain of o.sparseBlocks blocks holding
// o.sparseBurns burns in separate blocks, spread evenly, and times one
// replica's `poller run --until-finalized` from an empty ledger through a
// proxy that adds o.sparseLatency to every request and refuses eth_getLogs
// over o.sparseCap blocks with Alchemy's words and suggested range.
func (b *bench) sparse(ctx context.Context, o options, env ...string) (*Sparse, error) {
	dir, err := os.MkdirTemp("", "bench-anvil-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
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
	defer func() { _ = anvil.Process.Kill(); _ = anvil.Wait() }()
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
		return nil, fmt.Errorf("seeding anvil: %w", err)
	}
	head, err := c.BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	proxy, err := rpcfault.Start(url)
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
	chainID, err := c.ChainID(ctx)
	if err != nil {
		return nil, err
	}
	httpAddr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	runEnv := append([]string{
		"DATABASE_URL=" + dbURL, "RPC_URL=" + proxy.URL, "CHAIN_ID=" + chainID.String(),
		"BURN_CONTRACT=" + burnAddr.Hex(), "HTTP_ADDR=" + httpAddr.String(), "LOG_FORMAT=json",
	}, env...)
	logFile := filepath.Join(dir, "poller.log")
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, b.bin, "run", "--until-finalized")
	cmd.Env = append(os.Environ(), runEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if err != nil {
		out, _ := os.ReadFile(logFile)
		return nil, fmt.Errorf("poller run: %w\n%s", err, lastLines(string(out), 20))
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
		Blocks: blocks, Burns: o.sparseBurns, LatencyMs: o.sparseLatency.Milliseconds(), CapBlocks: o.sparseCap,
		Seconds: took.Seconds(), BlocksPer: float64(blocks) / took.Seconds(),
		FloorSeconds: floor, RatioToFloor: took.Seconds() / floor,
		Requests: st.Requests, Calls: st.Calls, Rows: rows, Settings: env,
	}, checkHead(head, uint64(cursor), rows, o.sparseBurns)
}

func checkHead(head, cursor uint64, rows, burns int) error {
	if rows != burns {
		return fmt.Errorf("sparse sync recorded %d rows, %d burns were sent (cursor %d, head %d)", rows, burns, cursor, head)
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
