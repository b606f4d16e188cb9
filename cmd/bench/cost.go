package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
)

// costChain is a live chain the cost phase follows: a real node sealing a
// block every BlockTime, a burn sent every BurnEvery.
type costChain struct {
	Node      string
	BlockTime time.Duration
	BurnEvery time.Duration
	// Finality says how the node's finalized block moves.
	Finality string
}

// costSlots is anvil's epoch in the cost phase: its finalized block is the
// head less two epochs (16 blocks), one block further each block, so that
// the window counts burns confirmed, not only seen, within minutes.
const costSlots = 8

// costChains are the chains -cost-chains names.
var costChains = map[string]costChain{
	// Base-like: 2 s blocks.
	"anvil-2s": {Node: nodeAnvil, BlockTime: 2 * time.Second, BurnEvery: 10 * time.Second, Finality: "head - 16, moving every block"},
	// Ethereum-like: 12 s blocks.
	"anvil-12s": {Node: nodeAnvil, BlockTime: 12 * time.Second, BurnEvery: 30 * time.Second, Finality: "head - 16, moving every block"},
	// geth --dev finalizes the last multiple of 32 at or below the head:
	// the target moves by 32 blocks at a time, as Ethereum's epochs do.
	"geth-2s": {Node: nodeGeth, BlockTime: 2 * time.Second, BurnEvery: 10 * time.Second, Finality: "the last multiple of 32, moving 32 blocks at a time"},
}

// defaultCostWeights are compute units per JSON-RPC call, by method: a large
// provider's public table (Alchemy's "Compute Unit Costs",
// docs.alchemy.com), the weights of issue 29. Each member of a batch is one
// call.
var defaultCostWeights = map[string]float64{
	"eth_getBlockByNumber":      16,
	"eth_getBlockByHash":        21,
	"eth_getLogs":               75,
	"eth_getBlockReceipts":      500,
	"eth_getTransactionReceipt": 15,
	"eth_blockNumber":           10,
	"eth_chainId":               10,
	"eth_subscribe":             10,
	"eth_unsubscribe":           10,
}

// wsByteWeight is what the same provider bills a subscription: 0.04 compute
// units per byte it delivers (every byte the node sends on the WebSocket
// connection, counted at a TCP proxy, is counted here).
const wsByteWeight = 0.04

// Cost is what following one live chain costs at the provider, caught up,
// for each subject (burnpoller with a setting, or Ponder) on the same chain
// at the same time, each through its own counting proxy.
type Cost struct {
	Chain      string             `json:"chain"`
	Node       string             `json:"node"`
	Finality   string             `json:"finality"`
	BlockTimeS float64            `json:"block_time_seconds"`
	BurnEveryS float64            `json:"burn_every_seconds"`
	WindowS    float64            `json:"window_seconds"`
	Blocks     uint64             `json:"blocks"`
	Burns      int                `json:"burns_sent_in_window"`
	Weights    map[string]float64 `json:"compute_units_by_method"`
	WSByteCU   float64            `json:"compute_units_per_websocket_byte"`
	Load       string             `json:"load_average_at_start"`
	Subjects   []*CostSubject     `json:"subjects"`
}

// CostSubject is one follower's traffic in the window, and per block.
type CostSubject struct {
	Name     string   `json:"name"`
	Settings []string `json:"settings,omitempty"`
	Replicas int      `json:"replicas,omitempty"`
	// Calls counts the JSON-RPC calls by method (a batch's members one
	// each); Requests the HTTP requests; ResponseBytes their bodies;
	// WSBytes what the node sent on the newHeads WebSocket.
	Calls         map[string]float64 `json:"calls"`
	Requests      float64            `json:"http_requests"`
	ResponseBytes float64            `json:"response_bytes"`
	WSBytes       float64            `json:"websocket_bytes,omitempty"`
	// Per block of the window.
	CallsPerBlock       float64            `json:"calls_per_block"`
	RequestsPerBlock    float64            `json:"http_requests_per_block"`
	BytesPerBlock       float64            `json:"response_bytes_per_block"`
	WSBytesPerBlock     float64            `json:"websocket_bytes_per_block,omitempty"`
	CUPerBlock          float64            `json:"compute_units_per_block"`
	CUByMethodPerBlock  map[string]float64 `json:"compute_units_per_block_by_method"`
	CallsByMethodPerBlk map[string]float64 `json:"calls_per_block_by_method"`
	CUPer30Days         float64            `json:"compute_units_per_30_days"`
	ToPonder            float64            `json:"compute_units_to_ponder,omitempty"`
	// Unweighted are methods called that the weight table lacks (counted
	// as 0).
	Unweighted []string `json:"unweighted_methods,omitempty"`
	// Recorded is how many burns the subject had recorded at the end
	// (payments and pending ones, or Ponder's rows), and Cursor where its
	// cursor stood: it was following, not failing.
	Recorded int   `json:"recorded_at_end"`
	Cursor   int64 `json:"cursor_at_end,omitempty"`
}

// costPhase follows each chain of o.costChains and counts what every
// subject asks of the node.
func (b *bench) costPhase(ctx context.Context, o options) ([]*Cost, error) {
	weights := maps.Clone(defaultCostWeights)
	if o.costWeights != "" {
		for _, kv := range strings.Split(o.costWeights, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			w, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("-cost-weights: %q is not method=weight", kv)
			}
			weights[k] = w
		}
	}
	var out []*Cost
	for _, name := range strings.Split(o.costChains, ",") {
		spec, ok := costChains[name]
		if !ok {
			return nil, fmt.Errorf("-cost-chains: unknown chain %q (known: %v)", name, slices.Sorted(maps.Keys(costChains)))
		}
		c, err := b.costRun(ctx, o, name, spec, weights)
		if err != nil {
			return out, fmt.Errorf("cost on %s: %w", name, err)
		}
		out = append(out, c)
		// Each chain's figures as soon as they are in: a later chain's
		// failure does not lose them.
		fmt.Fprint(os.Stderr, costSummary([]*Cost{c}))
	}
	return out, nil
}

// costRun starts a node sealing every spec.BlockTime, the subjects, and a
// trickle of burns; once every subject follows the chain it counts their
// calls over the window.
func (b *bench) costRun(ctx context.Context, o options, name string, spec costChain, weights map[string]float64) (_ *Cost, err error) {
	bin := o.geth
	if spec.Node == nodeAnvil {
		bin = o.anvil
	}
	res := &Cost{Chain: name, Node: spec.Node, Finality: spec.Finality, BlockTimeS: spec.BlockTime.Seconds(),
		BurnEveryS: spec.BurnEvery.Seconds(), Weights: weights, WSByteCU: wsByteWeight, Load: loadAverage()}
	l, err := startLiveChain(ctx, spec.Node, bin, nodeOptions{blockTime: spec.BlockTime, slots: costSlots}, 4*costSlots)
	if err != nil {
		return nil, err
	}
	defer l.n.close()
	n, s, contracts, final := l.n, l.s, l.contracts, l.final
	b.info = devchain.Info{RPCURL: n.url, ChainID: n.chainID, BurnContract: contracts.burn}
	start := []string{"START_BLOCK=" + strconv.FormatUint(final+1, 10)}

	logDir, err := os.MkdirTemp("", "bench-cost-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			_ = os.RemoveAll(logDir)
		} else {
			b.log.Error("cost run failed; logs kept", slog.String("dir", logDir))
		}
	}()
	var followers []*follower
	defer func() {
		for _, f := range followers {
			f.close(ctx, b.admin)
		}
	}()
	var compare []string
	if o.costCompare != "" {
		compare = strings.Split(o.costCompare, ",")
	}
	for i, sub := range costSubjects(o.costSettings, o.ponder != "", compare) {
		f, err := b.startFollower(ctx, o, n, sub, i, logDir, start)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sub.name, err)
		}
		followers = append(followers, f)
	}

	// A burn every spec.BurnEvery, sealed by the node's own clock.
	burns := s.trickle(ctx, contracts, spec.BurnEvery, b.log)
	defer burns.stop()

	if err := b.waitFollowing(ctx, followers); err != nil {
		return nil, err
	}
	// The steady state: burns seen at the head and confirmed at finality
	// alike, so the first one sent must be final.
	firstTx := <-burns.first
	r, err := s.receipt(ctx, firstTx)
	if err != nil {
		return nil, fmt.Errorf("the first burn: %w", err)
	}
	if err := harness.WaitFor(ctx, 10*time.Minute, "the first burn final", func() bool {
		f, err := finalized(ctx, n.url)
		return err == nil && f >= r.BlockNumber.Uint64()
	}); err != nil {
		return nil, err
	}
	// Start-up and catch-up calls behind, and a block or two of steady state.
	time.Sleep(2 * spec.BlockTime)
	window := max(o.costWindow, time.Duration(o.costMinBlocks)*spec.BlockTime)
	b.log.Info("counting", slog.String("chain", name), slog.Duration("window", window), slog.Int("subjects", len(followers)))
	before := trafficOf(followers)
	fromBlock, err := n.eth.BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	sentBefore := burns.sent.Load()
	began := time.Now()
	time.Sleep(window)
	after := trafficOf(followers)
	toBlock, err := n.eth.BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	res.WindowS, res.Blocks, res.Burns = time.Since(began).Seconds(), toBlock-fromBlock, int(burns.sent.Load()-sentBefore)
	if res.Blocks == 0 {
		return nil, errors.New("no block sealed in the window")
	}
	perMonth := 30 * 24 * time.Hour.Seconds() / spec.BlockTime.Seconds()
	var ponderCU float64
	for i, f := range followers {
		sub := f.spec
		c := subjectCost(sub, before[i], after[i], float64(res.Blocks), weights)
		c.CUPer30Days = c.CUPerBlock * perMonth
		if c.Recorded, c.Cursor, err = f.recorded(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", sub.name, err)
		}
		if (sub.ponder && c.Recorded == 0) || (!sub.ponder && c.Cursor <= int64(final)) {
			return nil, fmt.Errorf("%s recorded %d burns, its cursor at %d: it was not following the chain (logs in %s)",
				sub.name, c.Recorded, c.Cursor, logDir)
		}
		if sub.ponder {
			ponderCU = c.CUPerBlock
		}
		res.Subjects = append(res.Subjects, c)
	}
	if ponderCU > 0 {
		for _, c := range res.Subjects {
			c.ToPonder = c.CUPerBlock / ponderCU
		}
	}
	return res, nil
}

// costSummary is the cost phase as text: per chain, each subject's calls,
// requests, bytes and compute units per block, and per 30 days.
func costSummary(costs []*Cost) string {
	var b strings.Builder
	for _, c := range costs {
		fmt.Fprintf(&b, "\n%s (%s, a block every %.0f s, finalized %s), a burn every %.0f s; %d blocks and %d burns in %.0f s; load average at start %s\n",
			c.Chain, c.Node, c.BlockTimeS, c.Finality, c.BurnEveryS, c.Blocks, c.Burns, c.WindowS, c.Load)
		fmt.Fprintf(&b, "  %-44s %8s %8s %9s %8s %13s %8s\n", "per block", "calls", "HTTP", "KiB", "CU", "CU / 30 days", "÷ Ponder")
		for _, s := range c.Subjects {
			kib := (s.BytesPerBlock + s.WSBytesPerBlock) / 1024
			ratio := "-"
			if s.ToPonder > 0 {
				ratio = fmt.Sprintf("%.2f", s.ToPonder)
			}
			fmt.Fprintf(&b, "  %-44s %8.2f %8.2f %9.2f %8.1f %12.1fM %8s\n", s.Name, s.CallsPerBlock, s.RequestsPerBlock, kib,
				s.CUPerBlock, s.CUPer30Days/1e6, ratio)
		}
		for _, s := range c.Subjects {
			var parts []string
			for _, m := range slices.Sorted(maps.Keys(s.CallsByMethodPerBlk)) {
				parts = append(parts, fmt.Sprintf("%s %.2f (%.1f CU)", m, s.CallsByMethodPerBlk[m], s.CUByMethodPerBlock[m]))
			}
			if s.WSBytesPerBlock > 0 {
				parts = append(parts, fmt.Sprintf("WebSocket %.0f bytes (%.1f CU)", s.WSBytesPerBlock, wsByteWeight*s.WSBytesPerBlock))
			}
			fmt.Fprintf(&b, "  %s: %s\n", s.Name, cmp.Or(strings.Join(parts, ", "), "nothing"))
			if len(s.Unweighted) > 0 {
				fmt.Fprintf(&b, "    (no weight for %v: counted as 0)\n", s.Unweighted)
			}
		}
	}
	return b.String()
}

// costChainNames lists the known cost chains, for -cost-chains' help.
func costChainNames() string { return strings.Join(slices.Sorted(maps.Keys(costChains)), ",") }
