package main

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// The nodes a run can read from. Every figure names the one that produced
// it.
const (
	// nodeSim is go-ethereum's simulated backend inside the bench's own
	// process (devchain): sealed on demand, no process boundary.
	nodeSim = "sim"
	// nodeGeth is `geth --dev` (built from the module proxy at a pinned
	// version, -geth) as its own process, its chain on disk.
	nodeGeth = "geth"
	// nodeAnvil is anvil (npm @foundry-rs/anvil-linux-amd64, -anvil) as its
	// own process, with --prune-history.
	nodeAnvil = "anvil"
)

// gethVersion is the geth the real-node runs are measured with (the
// Makefile's GETH_VERSION, which also pins go-ethereum in go.mod).
const gethVersion = "v1.17.10"

// gethDevKey is the key geth --dev imports as its prefunded developer
// account when its keystore is empty (go-ethereum's cmd/utils.DeveloperKey,
// publicly known).
const gethDevKey = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"

// anvilKey is anvil's first dev account (publicly known).
const anvilKey = "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"

// nodeGasLimit is the block gas limit the nodes start with: room for
// several seeding transactions of a hundred burns each in one block.
const nodeGasLimit = 200_000_000

// realNode is a node running as its own process, as a user runs one: its
// JSON-RPC URL, chain id, a funded key, and how it seals blocks.
type realNode struct {
	kind string
	url  string
	// wsURL is the node's WebSocket endpoint (anvil serves it on the HTTP
	// port; geth on its own).
	wsURL   string
	chainID uint64
	key     *ecdsa.PrivateKey
	proc    *harness.Proc
	dir     string
	rpc     *rpc.Client
	eth     *ethclient.Client
	logFile *os.File
}

// nodeOptions choose how a node seals blocks.
type nodeOptions struct {
	// blockTime, when set, seals a block every blockTime as a live chain
	// does (geth --dev.period, anvil --block-time), whether or not
	// transactions wait; zero seals on demand (see startNode).
	blockTime time.Duration
	// slots is anvil's --slots-in-an-epoch (finalized = head - 2*slots);
	// zero: 4.
	slots int
	// memory keeps geth's database in memory (no --datadir), as a dev
	// node often runs; anvil's always is.
	memory bool
}

// startNode starts a node of kind (geth or anvil) from bin, its data and
// log in a fresh directory, and waits until it answers.
//
// Without o.blockTime, geth runs with --dev.period 0: it seals a block as
// soon as transactions become executable, so the seeder controls a block's
// contents by making a block's transactions executable together (see
// seeder.block); anvil runs with --no-mining and seals on evm_mine.
func startNode(ctx context.Context, kind, bin string, o nodeOptions) (_ *realNode, err error) {
	dir, err := os.MkdirTemp("", "bench-"+kind+"-")
	if err != nil {
		return nil, err
	}
	n := &realNode{kind: kind, dir: dir}
	defer func() {
		if err != nil {
			n.close()
		}
	}()
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	var args []string
	seconds := strconv.Itoa(int(o.blockTime / time.Second))
	switch kind {
	case nodeGeth:
		auth, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		ws, err := harness.FreeAddr()
		if err != nil {
			return nil, err
		}
		args = []string{"--dev", "--dev.period", seconds, "--dev.gaslimit", strconv.Itoa(nodeGasLimit)}
		if !o.memory {
			args = append(args, "--datadir", filepath.Join(dir, "data"))
		}
		args = append(args, "--http", "--http.addr", "127.0.0.1", "--http.port", strconv.Itoa(addr.Port), "--http.api", "eth,net,web3",
			"--ws", "--ws.addr", "127.0.0.1", "--ws.port", strconv.Itoa(ws.Port), "--ws.api", "eth",
			"--authrpc.port", strconv.Itoa(auth.Port), "--port", "0", "--nodiscover", "--maxpeers", "0", "--ipcdisable",
			"--verbosity", "2")
		n.key, _ = crypto.HexToECDSA(gethDevKey)
		n.wsURL = "ws://" + ws.String()
	case nodeAnvil:
		mining := []string{"--no-mining"}
		if o.blockTime > 0 {
			mining = []string{"--block-time", seconds}
		}
		slots := cmp.Or(o.slots, 4)
		args = append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(addr.Port), "--prune-history",
			"--gas-limit", strconv.Itoa(nodeGasLimit), "--slots-in-an-epoch", strconv.Itoa(slots), "--silent"}, mining...)
		n.key, _ = crypto.HexToECDSA(anvilKey)
		n.wsURL = "ws://" + addr.String()
	default:
		return nil, fmt.Errorf("node %q: want geth or anvil", kind)
	}
	if n.logFile, err = os.Create(filepath.Join(dir, kind+".log")); err != nil {
		return nil, err
	}
	n.proc, err = harness.Start(harness.Spec{Name: kind, Bin: bin, Args: args, Stdout: n.logFile, Stderr: n.logFile,
		Env: []string{"HOME=" + dir}}) // anvil writes under ~/.foundry
	if err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", kind, bin, err)
	}
	n.url = "http://" + addr.String()
	if n.rpc, err = rpc.DialContext(ctx, n.url); err != nil {
		return nil, err
	}
	n.eth = ethclient.NewClient(n.rpc)
	err = harness.WaitFor(ctx, time.Minute, kind+" answering on "+n.url, func() bool {
		id, err := n.eth.ChainID(ctx)
		if err != nil {
			return n.proc.Exited()
		}
		n.chainID = id.Uint64()
		return true
	})
	if err == nil && n.proc.Exited() {
		err = errors.New("exited")
	}
	if err != nil {
		out, _ := os.ReadFile(n.logFile.Name())
		return nil, fmt.Errorf("%s did not start: %w\n%s", kind, err, lastLines(string(out)))
	}
	return n, nil
}

// seal makes the node seal a block of its pending transactions: anvil on
// evm_mine; geth --dev seals on its own as they arrive (or every period).
func (n *realNode) seal(ctx context.Context) error {
	if n.kind != nodeAnvil {
		return nil
	}
	return n.rpc.CallContext(ctx, nil, "evm_mine")
}

// peakRSSMiB is the node's peak resident memory in MiB, -1 if unknown.
func (n *realNode) peakRSSMiB() int64 { return peakRSSMiB(n.proc) }

// close stops the node and removes its directory.
func (n *realNode) close() {
	if n.rpc != nil {
		n.rpc.Close()
	}
	if n.proc != nil {
		_, _ = n.proc.Stop(10 * time.Second)
	}
	if n.logFile != nil {
		_ = n.logFile.Close()
	}
	_ = os.RemoveAll(n.dir)
}
