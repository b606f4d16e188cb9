package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// scriptedNode is a consistent chain of empty blocks whose answers a test
// can bend: a lower finalized block, a range limit, failures.
type scriptedNode struct {
	mu        sync.Mutex
	chainID   uint64
	head      uint64
	finalized int64 // -1: none
	limit     uint64
	limitErr  func(from, to uint64) error // reply to a range over limit
	// slowAbove, when set, makes eth_getLogs over more blocks take a second.
	slowAbove uint64
	refuseAll bool // reply limitErr to every range
	failing   bool
	// logsPerBlock fills every block from emptyBelow on with that many
	// burn logs.
	logsPerBlock int
	emptyBelow   uint64
	// maxLogs, when set, ends a reply after that many logs: one meant to
	// go over the client's response cap need not be built whole (tens of
	// megabytes take seconds under -race, near the client's timeout).
	maxLogs  int
	finalTag error // reply to the "finalized" tag instead of a block
	spans    [][2]uint64
	methods  []string // every method asked, in order
	// stallMethod, when set, holds every call of that method until stall
	// is closed; stalled is signalled as each one arrives.
	stallMethod string
	stall       chan struct{}
	stalled     chan struct{}
}

func (n *scriptedNode) handle(method string, params []json.RawMessage) (any, error) {
	n.mu.Lock()
	n.methods = append(n.methods, method)
	stall, stalled := n.stall, n.stalled
	if method != n.stallMethod {
		stall = nil
	}
	n.mu.Unlock()
	if stall != nil {
		select {
		case stalled <- struct{}{}:
		default:
		}
		<-stall
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failing {
		return nil, errors.New("header not found")
	}
	switch method {
	case "eth_chainId":
		return hexutil.Uint64(n.chainID), nil
	case "eth_blockNumber":
		return hexutil.Uint64(n.head), nil
	case "eth_getLogs":
		var f struct {
			From hexutil.Uint64 `json:"fromBlock"`
			To   hexutil.Uint64 `json:"toBlock"`
		}
		_ = json.Unmarshal(params[0], &f)
		n.spans = append(n.spans, [2]uint64{uint64(f.From), uint64(f.To)})
		if n.slowAbove > 0 && uint64(f.To-f.From)+1 > n.slowAbove {
			n.mu.Unlock()
			time.Sleep(time.Second)
			n.mu.Lock()
		}
		if n.refuseAll || n.limit > 0 && uint64(f.To-f.From)+1 > n.limit {
			return nil, n.limitErr(uint64(f.From), uint64(f.To))
		}
		logs := []types.Log{}
		for b := max(uint64(f.From), n.emptyBelow); b <= uint64(f.To) && n.logsPerBlock > 0; b++ {
			if n.maxLogs > 0 && len(logs) >= n.maxLogs {
				break
			}
			for i := range n.logsPerBlock {
				l := burnLog(b, byte(b), uint(i), big.NewInt(1), 1)
				l.BlockHash = hashOf(b)
				l.TxHash = common.BigToHash(new(big.Int).SetUint64(b<<16 | uint64(i) + 1))
				logs = append(logs, l)
			}
		}
		return logs, nil
	case "eth_getBlockByNumber":
		var tag string
		if json.Unmarshal(params[0], &tag) == nil && (tag == "finalized" || tag == "safe") {
			if n.finalTag != nil {
				return nil, n.finalTag
			}
			if n.finalized < 0 {
				return nil, errors.New("finalized block not found")
			}
			return header(uint64(n.finalized), hashOf(uint64(n.finalized)), hashOf(uint64(n.finalized)-1)), nil
		}
		var num hexutil.Uint64
		if err := json.Unmarshal(params[0], &num); err != nil {
			return nil, err
		}
		if uint64(num) > n.head {
			return nil, nil
		}
		return header(uint64(num), hashOf(uint64(num)), hashOf(uint64(num)-1)), nil
	}
	return nil, fmt.Errorf("unexpected %s", method)
}

// set changes the node under its lock.
func (n *scriptedNode) set(f func(*scriptedNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n)
}

// asked returns every method the node was asked, in order.
func (n *scriptedNode) asked() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.methods)
}

// stallOn holds every call of method until the returned release is called
// (at the latest when the test ends, before its servers close).
func (n *scriptedNode) stallOn(t *testing.T, method string) (stalled <-chan struct{}, release func()) {
	t.Helper()
	stall, arrived := make(chan struct{}), make(chan struct{}, 1)
	n.set(func(n *scriptedNode) { n.stallMethod, n.stall, n.stalled = method, stall, arrived })
	var once sync.Once
	release = func() {
		once.Do(func() {
			n.set(func(n *scriptedNode) { n.stallMethod, n.stall = "", nil })
			close(stall)
		})
	}
	t.Cleanup(release)
	return arrived, release
}

func (n *scriptedNode) requested() [][2]uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([][2]uint64(nil), n.spans...)
}

type endpointsObs struct {
	recordingObserver
	mu     sync.Mutex
	active []string
	lag    []int64
	limits []uint64
}

func (o *endpointsObs) Lagging(_ string, behind int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lag = append(o.lag, behind)
}

func (o *endpointsObs) RangeLimit(_ string, blocks uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.limits = append(o.limits, blocks)
}

func (o *endpointsObs) Active(endpoint string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active = append(o.active, endpoint)
}

func newEndpoints(t *testing.T, cfg chain.EndpointsConfig, nodes ...*scriptedNode) (*chain.Endpoints, *endpointsObs, []string) {
	t.Helper()
	return newEndpointsOpts(t, chain.Options{Timeout: 30 * time.Second}, cfg, nodes...)
}

// newEndpointsOpts is newEndpoints with chosen client options.
func newEndpointsOpts(t *testing.T, opts chain.Options, cfg chain.EndpointsConfig, nodes ...*scriptedNode) (*chain.Endpoints, *endpointsObs, []string) {
	t.Helper()
	return newEndpointsVia(t, "http", opts, cfg, nodes...)
}

// newEndpointsVia is newEndpointsOpts with the nodes served over transport,
// "http" or "ws".
func newEndpointsVia(t *testing.T, transport string, opts chain.Options, cfg chain.EndpointsConfig, nodes ...*scriptedNode) (*chain.Endpoints, *endpointsObs, []string) {
	t.Helper()
	if cfg.Now == nil {
		// Cool-downs and cached readiness do not run out between two calls
		// of a test however slow the machine; a test that needs them to
		// passes its own clock.
		frozen := time.Now()
		cfg.Now = func() time.Time { return frozen }
	}
	var (
		clients []*chain.Client
		urls    []string
	)
	obs := &endpointsObs{}
	if opts.Observer == nil {
		opts.Observer = obs
	}
	for _, n := range nodes {
		var url string
		switch transport {
		case "http":
			srv := httptest.NewServer(&fakeNode{handle: n.handle})
			t.Cleanup(srv.Close)
			url = srv.URL
		case "ws":
			_, url = startWS(t, n.handle)
		default:
			t.Fatalf("unknown transport %q", transport)
		}
		c, err := chain.Dial(context.Background(), url, opts)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		urls = append(urls, c.String())
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = 1337
	}
	if cfg.Finality == "" {
		cfg.Finality = chain.FinalityFinalized
	}
	e := chain.NewEndpoints(clients, cfg, obs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(e.Close)
	return e, obs, urls
}

func node(head uint64, finalized int64) *scriptedNode {
	return &scriptedNode{chainID: 1337, head: head, finalized: finalized}
}

func TestTargetNeverMovesBackwards(t *testing.T) {
	t.Parallel()
	a := node(200, 100)
	e, obs, _ := newEndpoints(t, chain.EndpointsConfig{}, a)
	ctx := context.Background()
	if got, err := e.Target(ctx); err != nil || got != (chain.Target{Block: 100, Highest: 100}) {
		t.Fatalf("Target = %+v, %v", got, err)
	}
	// The node falls behind (a load balancer's lagging backend).
	a.set(func(n *scriptedNode) { n.finalized = 90 })
	got, err := e.Target(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (chain.Target{Block: 90, Highest: 100}) {
		t.Fatalf("Target = %+v, want what the node can prove (90) and the highest seen (100)", got)
	}
	if len(obs.lag) != 1 || obs.lag[0] != 10 {
		t.Fatalf("lag observed = %v, want [10]", obs.lag)
	}
}

func TestLaggingEndpointHandsOver(t *testing.T) {
	t.Parallel()
	a, b := node(200, 100), node(200, 100)
	e, obs, urls := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	a.set(func(n *scriptedNode) { n.finalized = 64 })
	b.set(func(n *scriptedNode) { n.finalized = 128 })
	got, err := e.Target(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (chain.Target{Block: 128, Highest: 128}) {
		t.Fatalf("Target = %+v, want b's 128", got)
	}
	if len(obs.active) == 0 || obs.active[len(obs.active)-1] != urls[1] {
		t.Fatalf("active endpoints = %v, want b (%s) last", obs.active, urls[1])
	}
}

func TestFailingEndpointHandsOver(t *testing.T) {
	t.Parallel()
	a, b := node(200, 100), node(200, 96)
	a.failing = true
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	ctx := context.Background()
	got, err := e.Target(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Block != 96 {
		t.Fatalf("Target = %+v, want b's 96", got)
	}
	// The burn range comes from the endpoint that gave the target.
	if _, err := e.BurnRange(ctx, []common.Address{contract}, 90, 96); err != nil {
		t.Fatal(err)
	}
	if n := len(b.requested()); n != 1 {
		t.Fatalf("b served %d eth_getLogs, want 1", n)
	}
}

func TestAllEndpointsFailing(t *testing.T) {
	t.Parallel()
	a, b := node(200, 100), node(200, 100)
	a.failing, b.failing = true, true
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	if _, err := e.Target(context.Background()); chain.ClassOf(err) != chain.ClassTransient {
		t.Fatalf("Target = %v, want a transient error", err)
	}
}

func TestAdaptiveRange(t *testing.T) {
	t.Parallel()
	gethStyle := func(from, to uint64) error { return errors.New("exceed maximum block range 10") }
	alchemyStyle := func(from, to uint64) error {
		return fmt.Errorf("Log response size exceeded. this block range should work: [%#x, %#x]", from, from+6)
	}
	bare := func(from, to uint64) error { return errors.New("block range too large") }
	tests := []struct {
		name      string
		limit     uint64
		reply     func(from, to uint64) error
		wantSpans [][2]uint64 // eth_getLogs ranges asked, in order
		wantTo    uint64
	}{
		{"stated limit", 11, gethStyle, [][2]uint64{{0, 99}, {0, 9}}, 9},
		{"suggested range", 7, alchemyStyle, [][2]uint64{{0, 99}, {0, 6}}, 6},
		{"halving", 20, bare, [][2]uint64{{0, 99}, {0, 49}, {0, 24}, {0, 11}}, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := node(1000, 1000)
			n.limit, n.limitErr = tt.limit, tt.reply
			e, obs, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 100}, n)
			e.HintDensity(1_000_000, 1) // sparse logs: only the provider limits the range
			if _, err := e.Target(context.Background()); err != nil {
				t.Fatal(err)
			}
			r, err := e.BurnRange(context.Background(), []common.Address{contract}, 0, 500)
			if err != nil {
				t.Fatal(err)
			}
			if r.To.Number != tt.wantTo {
				t.Fatalf("range ends at %d, want %d", r.To.Number, tt.wantTo)
			}
			if got := n.requested(); fmt.Sprint(got) != fmt.Sprint(tt.wantSpans) {
				t.Fatalf("asked %v, want %v", got, tt.wantSpans)
			}
			// The limit is remembered: the next range starts at the learned size.
			if _, err := e.BurnRange(context.Background(), []common.Address{contract}, tt.wantTo+1, 500); err != nil {
				t.Fatal(err)
			}
			spans := n.requested()
			last := spans[len(spans)-1]
			if last[1]-last[0]+1 != tt.wantTo+1 {
				t.Fatalf("next range %v, want %d blocks", last, tt.wantTo+1)
			}
			if len(obs.limits) == 0 {
				t.Fatal("no range limit observed")
			}
		})
	}
}

func TestRangeLimitGrowsBackSlowly(t *testing.T) {
	t.Parallel()
	n := node(100000, 100000)
	n.limit, n.limitErr = 10, func(uint64, uint64) error { return errors.New("block range too large") }
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 100, GrowAfter: 3}, n)
	e.HintDensity(1_000_000, 1) // sparse: ranges start at MaxRange
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	call := func() uint64 {
		r, err := e.BurnRange(ctx, []common.Address{contract}, next, 100000)
		if err != nil {
			t.Fatal(err)
		}
		span := r.To.Number - next + 1
		next = r.To.Number + 1
		return span
	}
	// 100 -> 50 -> 25 -> 12 -> 6 (fits); then three successes grow it by a quarter.
	if got := call(); got != 6 {
		t.Fatalf("first span %d, want 6", got)
	}
	call()
	call()
	n.set(func(n *scriptedNode) { n.limit = 0 }) // the provider lifts its limit
	if got := call(); got != 7 {
		t.Fatalf("span after growing = %d, want 7 (6 + a quarter, at least 1)", got)
	}
}

// TestRangeGrowsToTheProviderCap: on a sparse chain the range grows past
// MAX_BLOCK_RANGE while replies are small and fast (eight times a range
// while empty), learns the provider's
// cap from its refusal (Alchemy's suggested range), keeps it, and tries a
// quarter above it again only after ten times GrowAfter successes.
func TestRangeGrowsToTheProviderCap(t *testing.T) {
	t.Parallel()
	n := node(1_000_000, 1_000_000)
	n.limit = 10_000
	n.limitErr = func(from, to uint64) error {
		return fmt.Errorf("Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [%#x, %#x]", from, from+9_999)
	}
	e, obs, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 2_000, GrowTo: 100_000, GrowAfter: 2}, n)
	e.HintDensity(1_000_000, 1) // sparse: ranges start at MaxRange
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	var got []uint64
	for range 26 {
		r, err := e.BurnRange(ctx, []common.Address{contract}, next, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.To.Number-next+1)
		next = r.To.Number + 1
	}
	want := []uint64{2_000}
	for range 25 {
		want = append(want, 10_000) // the cap, from the 16,000-block refusal
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ranges of %v blocks, want %v", got, want)
	}
	var asked []uint64
	for _, s := range n.requested() {
		asked = append(asked, s[1]-s[0]+1)
	}
	// One refusal learns the cap; after 20 successes at it, one more
	// (12,500) tries a quarter above it and is refused in turn.
	wantAsked := append([]uint64{2_000, 16_000}, want[1:21]...)
	wantAsked = append(wantAsked, 12_500, 10_000, 10_000, 10_000, 10_000, 10_000)
	if fmt.Sprint(asked) != fmt.Sprint(wantAsked) {
		t.Fatalf("asked ranges of %v blocks, want %v", asked, wantAsked)
	}
	if len(obs.limits) == 0 || obs.limits[len(obs.limits)-1] != 10_000 {
		t.Fatalf("limits observed %v, want the last one 10000", obs.limits)
	}
}

// TestRangeGrowthStopsAtMaxRangeWithoutGrowTo: MAX_BLOCK_RANGE set by the
// user is a hard cap.
func TestRangeGrowthStopsAtMaxRangeWithoutGrowTo(t *testing.T) {
	t.Parallel()
	n := node(100_000, 100_000)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 2_000}, n)
	e.HintDensity(1_000_000, 1) // sparse: ranges start at MaxRange
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	for range 5 {
		r, err := e.BurnRange(ctx, []common.Address{contract}, next, 100_000)
		if err != nil {
			t.Fatal(err)
		}
		if span := r.To.Number - next + 1; span != 2_000 {
			t.Fatalf("range of %d blocks, want 2000", span)
		}
		next = r.To.Number + 1
	}
}

// TestRangeTimeoutAboveMaxRangeShrinks: a grown range the node cannot read
// within the RPC timeout is halved and kept there, not asked again.
func TestRangeTimeoutAboveMaxRangeShrinks(t *testing.T) {
	t.Parallel()
	n := node(100_000, 100_000)
	n.slowAbove = 5_000
	e, _, _ := newEndpointsOpts(t, chain.Options{Timeout: 200 * time.Millisecond},
		chain.EndpointsConfig{MaxRange: 2_000, GrowTo: 100_000}, n)
	e.HintDensity(1_000_000, 1) // sparse: ranges start at MaxRange
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	var got []string
	for range 5 {
		r, err := e.BurnRange(ctx, []common.Address{contract}, next, 100_000)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("BurnRange = %v, want a timeout", err)
			}
			got = append(got, "timeout")
			continue
		}
		got = append(got, fmt.Sprint(r.To.Number-next+1))
		next = r.To.Number + 1
	}
	// 2,000 grows to 16,000, which times out, and so does 8,000.
	if want := "[2000 timeout timeout 4000 4000]"; fmt.Sprint(got) != want {
		t.Fatalf("ranges %v, want %s", got, want)
	}
}

func TestRangeRefusedAtOneBlock(t *testing.T) {
	t.Parallel()
	n := node(1000, 1000)
	n.refuseAll = true
	n.limitErr = func(uint64, uint64) error { return errors.New("query returned more than 10000 results") }
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 4}, n)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := e.BurnRange(ctx, []common.Address{contract}, 10, 100)
	if !errors.Is(err, chain.ErrRangeAtOneBlock) {
		t.Fatalf("BurnRange = %v, want ErrRangeAtOneBlock", err)
	}
	// 4 -> 2 -> 1 blocks, each asked once.
	if got := fmt.Sprint(n.requested()); got != "[[10 13] [10 11] [10 10]]" {
		t.Fatalf("asked %s", got)
	}
	if err := e.Health(ctx); err == nil {
		t.Fatal("Health is fine while the endpoint refuses a single block")
	}
}

func TestVerifyRefusesAnotherChain(t *testing.T) {
	t.Parallel()
	a, b := node(10, 0), node(10, 0)
	b.chainID = 1
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	if err := e.Verify(context.Background()); !errors.Is(err, chain.ErrWrongChain) {
		t.Fatalf("Verify = %v, want ErrWrongChain", err)
	}
}

func TestVerifyWaitsForAnyEndpoint(t *testing.T) {
	t.Parallel()
	a := node(10, 0)
	a.failing = true
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a)
	if err := e.Verify(context.Background()); !errors.Is(err, chain.ErrNoEndpoint) {
		t.Fatalf("Verify = %v, want ErrNoEndpoint", err)
	}
	a.set(func(n *scriptedNode) { n.failing = false })
	if err := e.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestProbeFinality(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		node     *scriptedNode
		finality chain.Finality
		wantErr  error
	}{
		{"finalized block present", node(100, 64), chain.FinalityFinalized, nil},
		{"young chain without a finalized block yet", node(10, -1), chain.FinalityFinalized, nil},
		{"long chain that never finalized", node(5000, -1), chain.FinalityFinalized, chain.ErrFinalityUnsupported},
		{"tag rejected", &scriptedNode{chainID: 1337, head: 100, finalized: -1,
			finalTag: &jsonRPCError{-32602, "invalid argument 0: hex string without 0x prefix"}}, chain.FinalityFinalized, chain.ErrFinalityUnsupported},
		{"latest needs no tag", node(5000, -1), chain.FinalityLatest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _, _ := newEndpoints(t, chain.EndpointsConfig{Finality: tt.finality}, tt.node)
			err := e.ProbeFinality(context.Background())
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("ProbeFinality = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// jsonRPCError lets a scripted reply carry a JSON-RPC error code.
type jsonRPCError struct {
	code int
	msg  string
}

func (e *jsonRPCError) Error() string { return e.msg }

func TestHealthyLaggingEndpointBeatsACoolingOne(t *testing.T) {
	t.Parallel()
	a, b := node(200, 100), node(200, 100)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	ctx := context.Background()
	if got, err := e.Target(ctx); err != nil || got.Block != 100 {
		t.Fatalf("Target = %+v, %v", got, err)
	}
	// a fails its logs; b is a block behind.
	a.set(func(n *scriptedNode) { n.failing = true })
	if _, err := e.BurnRange(ctx, []common.Address{contract}, 90, 100); err == nil {
		t.Fatal("a's failure did not surface")
	}
	a.set(func(n *scriptedNode) { n.failing = false })
	b.set(func(n *scriptedNode) { n.finalized = 99 })
	got, err := e.Target(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Block != 99 {
		t.Fatalf("Target = %+v, want b's 99 rather than the cooling a", got)
	}
	if _, err := e.BurnRange(ctx, []common.Address{contract}, 90, 99); err != nil {
		t.Fatal(err)
	}
	if n := len(b.requested()); n != 1 {
		t.Fatalf("b served %d eth_getLogs, want 1", n)
	}
}

// denseNode is a node whose every block holds perBlock logs of the contract.
func denseNode(perBlock int) *scriptedNode {
	n := node(100000, 100000)
	n.logsPerBlock = perBlock
	return n
}

func TestRangesFollowLogDensity(t *testing.T) {
	t.Parallel()
	n := denseNode(100) // 100 logs a block
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 1000, TargetLogs: 500}, n)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	// The density is unknown: the first range asks 16 blocks.
	r, err := e.BurnRange(ctx, []common.Address{contract}, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Burns) != 1_600 {
		t.Fatalf("first range: %d logs, want 1600", len(r.Burns))
	}
	// Then 5 blocks a range: 500 logs.
	r, err = e.BurnRange(ctx, []common.Address{contract}, r.To.Number+1, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.To.Number - r.From.Number + 1; got != 5 || len(r.Burns) != 500 {
		t.Fatalf("second range: %d blocks, %d logs; want 5 and 500", got, len(r.Burns))
	}
	// Sparse again: ranges grow back towards MAX_BLOCK_RANGE, eight times a
	// range while empty.
	n.set(func(n *scriptedNode) { n.logsPerBlock = 0 })
	var spans []uint64
	next := r.To.Number + 1
	for range 10 {
		r, err = e.BurnRange(ctx, []common.Address{contract}, next, 100000)
		if err != nil {
			t.Fatal(err)
		}
		spans = append(spans, r.To.Number-r.From.Number+1)
		next = r.To.Number + 1
	}
	if fmt.Sprint(spans) != "[5 40 320 1000 1000 1000 1000 1000 1000 1000]" {
		t.Fatalf("spans = %v", spans)
	}
}

func TestReplyOverTheSizeCapNarrowsTheRange(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"http", "ws"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			n := denseNode(10)
			// A 256 KiB cap stands in for the default 8 MiB, which would take the
			// fake node seconds to fill under -race. A burn log is 700-odd bytes of
			// JSON.
			opts := chain.Options{Timeout: 10 * time.Second, MaxResponseBytes: 256 << 10}
			e, obs, _ := newEndpointsVia(t, transport, opts, chain.EndpointsConfig{MaxRange: 400, TargetLogs: 500}, n)
			e.HintDensity(400, 1) // wrongly sparse: the first range is 400 blocks, 4,000 logs
			ctx := context.Background()
			if _, err := e.Target(ctx); err != nil {
				t.Fatal(err)
			}
			r, err := e.BurnRange(ctx, []common.Address{contract}, 0, 100000)
			if err != nil {
				t.Fatal(err)
			}
			var spans []uint64
			for _, s := range n.requested() {
				spans = append(spans, s[1]-s[0]+1)
			}
			got := r.To.Number + 1
			if len(r.Burns) != int(got)*10 {
				t.Fatalf("first range: %d blocks, %d logs", got, len(r.Burns))
			}
			switch transport {
			case "http":
				// The reply over the cap is read as far as the cap: the
				// blocks it held whole (about 360 logs' worth) are the next
				// range, which fits.
				if len(spans) != 2 || spans[0] != 400 || spans[1] != got || got < 25 || got > 50 {
					t.Fatalf("asked spans %v (the range read %d blocks), want 400 and then the blocks the cut reply held whole", spans, got)
				}
			case "ws":
				// A WebSocket reply over the cap is not scanned: a quarter
				// at a time, 400 and then 100 are over the cap; 25 blocks
				// (250 logs) are not.
				if want := []uint64{400, 100, 25}; !slices.Equal(spans, want) || got != 25 {
					t.Fatalf("asked spans %v, want %v", spans, want)
				}
			}
			// The narrowing is no failure of the endpoint: it still serves.
			if _, err := e.Target(ctx); err != nil {
				t.Fatal(err)
			}
			if len(obs.active) != 0 {
				t.Fatalf("hand-overs %v, want none", obs.active)
			}
		})
	}
}

// TestHintWithoutLogsKeepsTheProbe: a ledger that counted no logs (a first
// sync from START_BLOCK holds none yet) says nothing of the chain: the
// first range is still the small probe, not MaxRange blocks of a dense
// chain in one reply over the cap.
func TestHintWithoutLogsKeepsTheProbe(t *testing.T) {
	t.Parallel()
	n := denseNode(400)
	opts := chain.Options{Timeout: 10 * time.Second, MaxResponseBytes: 8 << 20}
	e, _, _ := newEndpointsOpts(t, opts, chain.EndpointsConfig{MaxRange: 2000, GrowTo: 100_000}, n)
	e.HintDensity(256, 0)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.To.Number + 1; got != 16 {
		t.Fatalf("first range %d blocks, want the 16-block probe", got)
	}
	if reqs := n.requested(); len(reqs) != 1 {
		t.Fatalf("asked %v, want one range and no reply over the cap", reqs)
	}
}

// TestSparseThenDenseOneReplyOverTheCap: ranges grow eight times a reply
// across empty blocks and then meet a dense stretch. The one reply over
// the cap shows where the logs begin and how dense they are: the next
// range runs to there and a target's worth beyond, and the ranges after it
// keep to the dense stretch's size; none is over the cap again.
func TestSparseThenDenseOneReplyOverTheCap(t *testing.T) {
	t.Parallel()
	n := denseNode(50)
	n.emptyBelow = 300
	// A 256 KiB cap stands in for the default 8 MiB (a burn log is 700-odd
	// bytes of JSON): about 350 logs, where ranges aim for 200. The reply
	// over it holds 2,000 logs rather than all 43,400 of its blocks: the
	// client reads no further than the cap either way.
	n.maxLogs = 2000
	opts := chain.Options{Timeout: 10 * time.Second, MaxResponseBytes: 256 << 10}
	e, _, _ := newEndpointsOpts(t, opts, chain.EndpointsConfig{MaxRange: 100, GrowTo: 100_000, TargetLogs: 200}, n)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	var read []uint64
	for next := uint64(0); next < 500; {
		r, err := e.BurnRange(ctx, []common.Address{contract}, next, 100000)
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, r.To.Number-next+1)
		next = r.To.Number + 1
	}
	var asked []uint64
	for _, s := range n.requested() {
		asked = append(asked, s[1]-s[0]+1)
	}
	// 16 and 128 blocks are empty; 1024 from block 144 is over the cap,
	// its cut reply dense from block 300 on at 50 logs a block: the next
	// range is 156 empty blocks and 4 dense ones (200 logs), and then 4
	// blocks a range.
	if want := []uint64{16, 128, 1024, 160, 4, 4}; !slices.Equal(asked[:6], want) {
		t.Fatalf("asked ranges of %v blocks, want %v first", asked, want)
	}
	if len(asked) != len(read)+1 {
		t.Fatalf("asked %v and read %v: more than one reply was over the cap", asked, read)
	}
}

func TestDensityHintFromTheLedger(t *testing.T) {
	t.Parallel()
	n := denseNode(100)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 1000, TargetLogs: 500}, n)
	e.HintDensity(256, 25600) // the ledger: 100 logs a block
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.To.Number + 1; got != 5 {
		t.Fatalf("first range %d blocks, want 5 (500 logs at 100 a block)", got)
	}
	if reqs := n.requested(); len(reqs) != 1 {
		t.Fatalf("asked %v; the hint should have avoided any refusal", reqs)
	}
}

// BurnRange and Header use an endpoint whose chain id was checked, even
// when nothing asked for a target before (poller verify --to N): one on
// another chain is never asked for logs, one down hands over.
func TestBurnRangeAndHeaderUseAVerifiedEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		bad  func(*scriptedNode)
	}{
		{"first on another chain", func(n *scriptedNode) { n.chainID = 1 }},
		{"first down", func(n *scriptedNode) { n.failing = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := node(200, 100), node(200, 100)
			a.logsPerBlock, b.logsPerBlock = 1, 1
			tt.bad(a)
			e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
			ctx := context.Background()
			r, err := e.BurnRange(ctx, []common.Address{contract}, 90, 93)
			if err != nil {
				t.Fatal(err)
			}
			if r.From.Number != 90 || r.To.Number != 93 || len(r.Burns) != 4 {
				t.Fatalf("range %d..%d with %d burns, want 90..93 with 4", r.From.Number, r.To.Number, len(r.Burns))
			}
			if got := b.requested(); fmt.Sprint(got) != "[[90 93]]" {
				t.Fatalf("good endpoint asked %v, want [[90 93]]", got)
			}
			if got := a.asked(); slices.Contains(got, "eth_getLogs") || slices.Contains(got, "eth_getBlockByNumber") {
				t.Fatalf("bad endpoint asked %v; only eth_chainId may reach it", got)
			}
			h, err := e.Header(ctx, 50)
			if err != nil || h.Hash != hashOf(50) {
				t.Fatalf("Header = %+v, %v", h, err)
			}
			if got := a.asked(); slices.Contains(got, "eth_getBlockByNumber") {
				t.Fatalf("bad endpoint asked %v for a header", got)
			}
		})
	}
}

// Header tries the next endpoint when the serving one fails.
func TestHeaderFailsOver(t *testing.T) {
	t.Parallel()
	a, b := node(200, 100), node(200, 100)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{}, a, b)
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	a.set(func(n *scriptedNode) { n.failing = true })
	h, err := e.Header(ctx, 50)
	if err != nil || h.Hash != hashOf(50) {
		t.Fatalf("Header = %+v, %v; want block 50 from the second endpoint", h, err)
	}
}

// A call the caller cancels is not the node's fault: no failure is counted
// and the endpoint keeps serving. The request timeout (RPC_TIMEOUT) firing
// is the node's fault: a transient failure, and the next endpoint takes over.
func TestCancelledCallIsNotTheNodesFault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		method   string // the method the slow node holds
		call     string // Target or BurnRange
		timeout  time.Duration
		cancel   bool
		want     string // the observed calls of the held request
		handOver bool
	}{
		{"caller cancels BurnRange", "eth_getLogs", "BurnRange", 30 * time.Second, true,
			"eth_getLogs=canceled,eth_getBlockByNumber=canceled,eth_getBlockByNumber=canceled", false},
		{"caller cancels Target", "eth_getBlockByNumber", "Target", 30 * time.Second, true,
			"eth_getBlockByNumber=canceled", false},
		// The held request waits for ever; the timeout is long enough that
		// the other requests of the test never run into it on a busy machine.
		{"request timeout fires", "eth_getLogs", "BurnRange", 2 * time.Second, false,
			"eth_getLogs=transient,eth_getBlockByNumber=transient,eth_getBlockByNumber=transient", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := node(200, 100), node(200, 100)
			e, obs, urls := newEndpointsOpts(t, chain.Options{Timeout: tt.timeout}, chain.EndpointsConfig{}, a, b)
			bg := context.Background()
			if got, err := e.Target(bg); err != nil || got.Block != 100 {
				t.Fatalf("Target = %+v, %v", got, err)
			}
			obs.recordingObserver.mu.Lock()
			before := len(obs.got)
			obs.recordingObserver.mu.Unlock()

			stalled, release := a.stallOn(t, tt.method)
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				var err error
				if tt.call == "Target" {
					_, err = e.Target(ctx)
				} else {
					_, err = e.BurnRange(ctx, []common.Address{contract}, 90, 100)
				}
				errc <- err
			}()
			if tt.cancel {
				select {
				case <-stalled:
				case <-time.After(30 * time.Second):
					t.Fatal("the request never reached the node")
				}
				cancel()
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not return", tt.call)
			}
			switch {
			case tt.cancel && !errors.Is(err, context.Canceled):
				t.Fatalf("%s = %v, want context.Canceled", tt.call, err)
			case !tt.cancel && chain.ClassOf(err) != chain.ClassTransient:
				t.Fatalf("%s = %v, want a transient error", tt.call, err)
			}
			obs.recordingObserver.mu.Lock()
			observed := strings.Join(obs.got[before:], ",")
			obs.recordingObserver.mu.Unlock()
			if observed != tt.want {
				t.Fatalf("observed %s, want %s", observed, tt.want)
			}
			release()

			// The next range: still from a after a cancellation, from b
			// after a timeout.
			if _, err := e.BurnRange(bg, []common.Address{contract}, 90, 100); err != nil {
				t.Fatal(err)
			}
			if got := len(b.requested()); tt.handOver != (got == 1) || got > 1 {
				t.Fatalf("b served %d ranges; hand-over wanted: %v", got, tt.handOver)
			}
			if !tt.handOver {
				if got := b.asked(); len(got) != 0 {
					t.Fatalf("b was asked %v after a cancelled call", got)
				}
				if len(obs.active) != 0 {
					t.Fatalf("hand-overs %v after a cancelled call", obs.active)
				}
				if err := e.Health(bg); err != nil {
					t.Fatalf("Health = %v after a cancelled call", err)
				}
			} else if len(obs.active) == 0 || obs.active[len(obs.active)-1] != urls[1] {
				t.Fatalf("active endpoints %v, want b (%s) last", obs.active, urls[1])
			}
		})
	}
}

// TestReadinessDoesNotAskANodeThatJustAnswered: the serving endpoint's
// answers to the loop stand for its readiness, so a replica that polls
// spends no eth_chainId on /readyz; one that reads nothing (a standby) asks
// once, then its answer stands as long as the last one would; a failure
// since the last answer asks again.
func TestReadinessDoesNotAskANodeThatJustAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	later := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	chainIDs := func(n *scriptedNode) int {
		c := 0
		for _, m := range n.asked() {
			if m == "eth_chainId" {
				c++
			}
		}
		return c
	}

	polling := node(100, 90)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{Now: clock}, polling)
	if _, err := e.Target(ctx); err != nil { // verifies the chain id once
		t.Fatal(err)
	}
	for range 3 {
		later(10 * time.Second)
		if err := e.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := chainIDs(polling); got != 1 {
		t.Fatalf("%d eth_chainId calls for a polling replica's readiness, want only the first use's", got)
	}

	standby := node(100, 90)
	s, _, _ := newEndpoints(t, chain.EndpointsConfig{Now: clock}, standby)
	for range 3 {
		later(10 * time.Second)
		if err := s.Health(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := chainIDs(standby); got != 1 {
		t.Fatalf("%d eth_chainId calls for a standby's readiness probed three times, want 1", got)
	}

	// A failed read since: readiness asks again, and says so.
	standby.set(func(n *scriptedNode) { n.failing = true })
	if _, err := s.Target(ctx); err == nil {
		t.Fatal("Target of a failing node succeeded")
	}
	later(10 * time.Second)
	if err := s.Health(ctx); err == nil || err.Error() != "unreachable" {
		t.Fatalf("Health after a failure = %v, want unreachable", err)
	}
}
