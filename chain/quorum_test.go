package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

type handler = func(string, []json.RawMessage) (any, error)

// serveNode serves handle as a JSON-RPC node and returns its URL.
func serveNode(t *testing.T, handle handler) string {
	t.Helper()
	return serveRecording(t, handle, nil)
}

// serveDown returns the URL of a node that answers every request with HTTP
// 500, or, when refused, of a closed port.
func serveDown(t *testing.T, refused bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	}))
	if refused {
		srv.Close()
	} else {
		t.Cleanup(srv.Close)
	}
	return srv.URL
}

// endpointsAt builds Endpoints over the nodes at urls, in that order, with
// a frozen clock (cool-downs never run out) and a faultObs observing both
// the clients and the set.
func endpointsAt(t *testing.T, cfg chain.EndpointsConfig, urls ...string) (*chain.Endpoints, *faultObs, []string) {
	t.Helper()
	if cfg.Now == nil {
		frozen := time.Now()
		cfg.Now = func() time.Time { return frozen }
	}
	if cfg.ChainID == 0 {
		cfg.ChainID = 1337
	}
	if cfg.Finality == "" {
		cfg.Finality = chain.FinalityFinalized
	}
	obs := &faultObs{}
	var (
		clients []*chain.Client
		names   []string
	)
	for _, u := range urls {
		c, err := chain.Dial(context.Background(), u, chain.Options{Timeout: 10 * time.Second, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		names = append(names, c.String())
	}
	e := chain.NewEndpoints(clients, cfg, obs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(e.Close)
	return e, obs, names
}

// editLogs answers as n does, with its eth_getLogs replies passed through edit.
func editLogs(n *scriptedNode, edit func([]types.Log) []types.Log) handler {
	return func(m string, p []json.RawMessage) (any, error) {
		res, err := n.handle(m, p)
		if m == "eth_getLogs" && err == nil {
			return edit(res.([]types.Log)), nil
		}
		return res, err
	}
}

// forgeBurn adds a well-formed burn in block 85 with its canonical hash.
func forgeBurn(logs []types.Log) []types.Log {
	return append(logs, burnLog(85, 0xee, 5, big.NewInt(1_000_000), 1))
}

// hideBurn leaves out the burn of block 85.
func hideBurn(logs []types.Log) []types.Log {
	return slices.DeleteFunc(logs, func(l types.Log) bool { return l.BlockNumber == 85 })
}

// otherAmount changes the amount of the burn of block 85.
func otherAmount(logs []types.Log) []types.Log {
	for i := range logs {
		if logs[i].BlockNumber == 85 {
			logs[i].Data = append(word(big.NewInt(2)), word(big.NewInt(1))...)
		}
	}
	return logs
}

// pruneBelow answers as n does, except that eth_getLogs from below floor is
// refused as pruned history (EIP-4444).
func pruneBelow(n *scriptedNode, floor uint64) handler {
	return func(m string, p []json.RawMessage) (any, error) {
		if m == "eth_getLogs" {
			var f struct {
				From hexutil.Uint64 `json:"fromBlock"`
			}
			if err := json.Unmarshal(p[0], &f); err != nil {
				return nil, err
			}
			if uint64(f.From) < floor {
				n.set(func(n *scriptedNode) { n.methods = append(n.methods, "eth_getLogs(pruned)") })
				return nil, &jsonRPCError{4444, "pruned history unavailable"}
			}
		}
		return n.handle(m, p)
	}
}

// count counts method in asked.
func count(asked []string, method string) int {
	n := 0
	for _, m := range asked {
		if m == method {
			n++
		}
	}
	return n
}

// burnsOf is what a scriptedNode with one burn a block holds in [from, to].
func burnsOf(from, to uint64) string {
	var bs []chain.Burn
	for b := from; b <= to; b++ {
		bs = append(bs, chain.Burn{BlockNumber: b, TxHash: common.BigToHash(new(big.Int).SetUint64(b<<16 + 1)), Amount: big.NewInt(1)})
	}
	return burnKeys(bs)
}

func oneBurnABlock(head uint64, finalized int64) *scriptedNode {
	n := node(head, finalized)
	n.logsPerBlock = 1
	return n
}

func TestQuorumOfTwoAgreeing(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 90)
	e, obs, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, a.handle), serveNode(t, b.handle))
	ctx := context.Background()
	got, err := e.Target(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (chain.Target{Block: 90, Highest: 100}) {
		t.Fatalf("Target = %+v, want the lower target 90 (highest 100)", got)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Number != 80 || r.To.Number != 90 || r.To.Hash != hashOf(90) {
		t.Fatalf("range %d..%d (%s)", r.From.Number, r.To.Number, r.To.Hash)
	}
	if got, want := burnKeys(r.Burns), burnsOf(80, 90); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	for name, n := range map[string]*scriptedNode{"a": a, "b": b} {
		if got := fmt.Sprint(n.requested()); got != "[[80 90]]" {
			t.Fatalf("%s asked %s, want [[80 90]]", name, got)
		}
	}
	if d := obs.disagreements(); len(d) != 0 {
		t.Fatalf("disagreements %v, want none", d)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
}

func TestQuorumOfTwoDisagreeing(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	forging := true
	bHandle := editLogs(b, func(l []types.Log) []types.Log {
		b.mu.Lock()
		f := forging
		b.mu.Unlock()
		if f {
			return forgeBurn(l)
		}
		return l
	})
	e, obs, names := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, a.handle), serveNode(t, bHandle))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90)
	if !errors.Is(err, chain.ErrQuorumDisagreement) || chain.ClassOf(err) != chain.ClassBadReply {
		t.Fatalf("BurnRange = %v (class %s), want ErrQuorumDisagreement of ClassBadReply", err, chain.ClassOf(err))
	}
	if r.Burns != nil || r.To.Number != 0 {
		t.Fatalf("a range came back with the error: %+v", r)
	}
	if d := obs.disagreements(); !slices.Equal(d, names) {
		t.Fatalf("disagreements %v, want both endpoints %v (a tie)", d, names)
	}
	err = e.Health(ctx)
	if want := "quorum not reached: endpoints disagree on blocks [80, 90]"; err == nil || err.Error() != want {
		t.Fatalf("Health = %v, want %q", err, want)
	}
	// b mends its ways: the next range agrees and readiness recovers.
	b.set(func(*scriptedNode) { forging = false })
	r, err = e.BurnRange(ctx, []common.Address{contract}, 80, 90)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), burnsOf(80, 90); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v after agreement", err)
	}
	if d := obs.disagreements(); len(d) != 2 {
		t.Fatalf("disagreements %v, want still the two of the split", d)
	}
}

func TestQuorumOfThreeOutvotesADissenter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func([]types.Log) []types.Log
	}{
		{"hides a burn", hideBurn},
		{"another amount", otherAmount},
		{"forges a burn", forgeBurn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b, c := oneBurnABlock(200, 100), oneBurnABlock(200, 100), oneBurnABlock(200, 100)
			e, obs, names := endpointsAt(t, chain.EndpointsConfig{Quorum: 2},
				serveNode(t, a.handle), serveNode(t, editLogs(b, tt.edit)), serveNode(t, c.handle))
			ctx := context.Background()
			if got, err := e.Target(ctx); err != nil || got.Block != 100 {
				t.Fatalf("Target = %+v, %v", got, err)
			}
			r, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := burnKeys(r.Burns), burnsOf(80, 90); got != want {
				t.Fatalf("burns %s, want a's %s", got, want)
			}
			if r.From.Number != 80 || r.To.Number != 90 {
				t.Fatalf("range %d..%d, want 80..90", r.From.Number, r.To.Number)
			}
			if d := obs.disagreements(); !slices.Equal(d, names[1:2]) {
				t.Fatalf("disagreements %v, want b only (%s)", d, names[1])
			}
			if err := e.Health(ctx); err != nil {
				t.Fatalf("Health = %v", err)
			}
			// b is demoted: the next target and range come from a and c.
			before := len(b.asked())
			if got, err := e.Target(ctx); err != nil || got.Block != 100 {
				t.Fatalf("Target = %+v, %v", got, err)
			}
			if _, err := e.BurnRange(ctx, []common.Address{contract}, 91, 100); err != nil {
				t.Fatal(err)
			}
			if got := b.asked()[before:]; len(got) != 0 {
				t.Fatalf("demoted b was asked %v", got)
			}
			for name, n := range map[string]*scriptedNode{"a": a, "c": c} {
				if got := fmt.Sprint(n.requested()); got != "[[80 90] [91 100]]" {
					t.Fatalf("%s asked %s, want [[80 90] [91 100]]", name, got)
				}
			}
			if d := obs.disagreements(); len(d) != 1 {
				t.Fatalf("disagreements %v, want b's one", d)
			}
		})
	}
}

func TestQuorumUnavailable(t *testing.T) {
	t.Parallel()
	for _, refused := range []bool{false, true} {
		name := "HTTP 500"
		if refused {
			name = "connection refused"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := oneBurnABlock(200, 100)
			e, obs, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, a.handle), serveDown(t, refused))
			ctx := context.Background()
			const want = "waiting for quorum: 1 of 2 endpoints answering"
			got, err := e.Target(ctx)
			if !errors.Is(err, chain.ErrQuorumUnavailable) {
				t.Fatalf("Target = %+v, %v; want ErrQuorumUnavailable", got, err)
			}
			if err := e.Health(ctx); err == nil || err.Error() != want {
				t.Fatalf("Health = %v, want %q", err, want)
			}
			r, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90)
			if !errors.Is(err, chain.ErrQuorumUnavailable) {
				t.Fatalf("BurnRange = %v, want ErrQuorumUnavailable", err)
			}
			if r.Burns != nil || r.To.Number != 0 {
				t.Fatalf("a range came back with the error: %+v", r)
			}
			if got := fmt.Sprint(a.requested()); got != "[[80 90]]" {
				t.Fatalf("a asked %s, want [[80 90]]", got)
			}
			if err := e.Health(ctx); err == nil || err.Error() != want {
				t.Fatalf("Health = %v, want %q", err, want)
			}
			if d := obs.disagreements(); len(d) != 0 {
				t.Fatalf("disagreements %v, want none", d)
			}
		})
	}
}

func TestQuorumRangeIsTheShortestLimit(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(2000, 1000), oneBurnABlock(2000, 1000)
	b.limit = 10
	b.limitErr = func(uint64, uint64) error { return &jsonRPCError{-32602, "exceed maximum block range: 10"} }
	e, _, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2, MaxRange: 100}, serveNode(t, a.handle), serveNode(t, b.handle))
	e.HintDensity(1_000_000, 1) // sparse: ranges start at MaxRange
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Number != 0 || r.To.Number != 9 {
		t.Fatalf("range %d..%d, want b's 0..9", r.From.Number, r.To.Number)
	}
	if got, want := burnKeys(r.Burns), burnsOf(0, 9); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	// a served 100 blocks, then answered again for b's 10; b refused 100.
	if got := fmt.Sprint(a.requested()); got != "[[0 99] [0 9]]" {
		t.Fatalf("a asked %s", got)
	}
	if got := fmt.Sprint(b.requested()); got != "[[0 99] [0 9]]" {
		t.Fatalf("b asked %s", got)
	}
}

func TestPrunedHistoryFailsOverToAnArchive(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	e, _, _ := endpointsAt(t, chain.EndpointsConfig{}, serveNode(t, pruneBelow(a, 50)), serveNode(t, b.handle))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Number != 10 || r.To.Number != 20 {
		t.Fatalf("range %d..%d, want 10..20", r.From.Number, r.To.Number)
	}
	if got, want := burnKeys(r.Burns), burnsOf(10, 20); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if got := count(a.asked(), "eth_getLogs(pruned)"); got != 1 {
		t.Fatalf("a refused %d ranges, want 1 (asked %v)", got, a.asked())
	}
	if got := fmt.Sprint(b.requested()); got != "[[10 20]]" {
		t.Fatalf("b asked %s, want [[10 20]]", got)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
	// a is passed over for those blocks without being asked again, even
	// while b is cooling down after a failure.
	b.set(func(n *scriptedNode) { n.failing = true })
	if _, err := e.BurnRange(ctx, []common.Address{contract}, 10, 20); err == nil {
		t.Fatal("b's failure did not surface")
	}
	if got := count(a.asked(), "eth_getLogs(pruned)"); got != 1 {
		t.Fatalf("a was asked for pruned blocks again: %v", a.asked())
	}
	// Above the refused range a serves again.
	r, err = e.BurnRange(ctx, []common.Address{contract}, 60, 70)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), burnsOf(60, 70); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if got := fmt.Sprint(a.requested()); got != "[[60 70]]" {
		t.Fatalf("a served %s, want [[60 70]]", got)
	}
}

func TestPrunedHistoryNowhereServed(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	e, _, _ := endpointsAt(t, chain.EndpointsConfig{}, serveNode(t, pruneBelow(a, 50)), serveNode(t, pruneBelow(b, 50)))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := e.BurnRange(ctx, []common.Address{contract}, 10, 20)
		if !errors.Is(err, chain.ErrHistoryUnavailable) || chain.ClassOf(err) != chain.ClassPruned {
			t.Fatalf("BurnRange #%d = %v (class %s), want ErrHistoryUnavailable of ClassPruned", i, err, chain.ClassOf(err))
		}
		if r.Burns != nil || r.To.Number != 0 {
			t.Fatalf("a range came back with the error: %+v", r)
		}
		const want = "history not served: block 10 needs an archive endpoint"
		if err := e.Health(ctx); err == nil || err.Error() != want {
			t.Fatalf("Health = %v, want %q", err, want)
		}
	}
	// Each refused once: the second call asked nobody.
	for name, n := range map[string]*scriptedNode{"a": a, "b": b} {
		if got := count(n.asked(), "eth_getLogs(pruned)"); got != 1 {
			t.Fatalf("%s refused %d ranges, want 1", name, got)
		}
	}
	// Newer blocks are served, and readiness recovers.
	r, err := e.BurnRange(ctx, []common.Address{contract}, 60, 70)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), burnsOf(60, 70); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v after a range was read", err)
	}
}

// The error for history no endpoint serves carries the endpoints' pruned
// reply (ErrHistoryPruned), with or without a quorum, and not some other
// cause.
func TestPrunedHistoryErrorKeepsTheRefusal(t *testing.T) {
	t.Parallel()
	for _, quorum := range []int{0, 2} {
		t.Run(fmt.Sprintf("quorum=%d", quorum), func(t *testing.T) {
			t.Parallel()
			a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
			e, _, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: quorum}, serveNode(t, pruneBelow(a, 50)), serveNode(t, pruneBelow(b, 50)))
			ctx := context.Background()
			if _, err := e.Target(ctx); err != nil {
				t.Fatal(err)
			}
			_, err := e.BurnRange(ctx, []common.Address{contract}, 10, 20)
			if !errors.Is(err, chain.ErrHistoryUnavailable) || chain.ClassOf(err) != chain.ClassPruned {
				t.Fatalf("BurnRange = %v, want ErrHistoryUnavailable of ClassPruned", err)
			}
			if !errors.Is(err, chain.ErrHistoryPruned) || errors.Is(err, chain.ErrNoEndpoint) {
				t.Fatalf("BurnRange = %v; want it to wrap the pruned reply (ErrHistoryPruned), not ErrNoEndpoint", err)
			}
		})
	}
}

// With a quorum, an endpoint that pruned the blocks is no dissenter: the
// archive endpoints make the quorum.
func TestQuorumPrunedEndpointIsNoDissenter(t *testing.T) {
	t.Parallel()
	a, b, c := oneBurnABlock(200, 100), oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	e, obs, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2},
		serveNode(t, pruneBelow(a, 50)), serveNode(t, b.handle), serveNode(t, c.handle))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), burnsOf(10, 20); got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if d := obs.disagreements(); len(d) != 0 {
		t.Fatalf("disagreements %v, want none", d)
	}
	if got := count(a.asked(), "eth_getLogs(pruned)"); got != 1 {
		t.Fatalf("a refused %d ranges, want 1", got)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
}

// TestCreditsNothingReadsOneEndpointUnchecked: head tracking's reads credit
// nothing, so they go to the serving endpoint alone, without receipts and
// without a quorum, and count no disagreement: nodes a block apart at the
// head would otherwise outvote each other on every read.
func TestCreditsNothingReadsOneEndpointUnchecked(t *testing.T) {
	t.Parallel()
	real := burnLog(12, 1, 0, big.NewInt(5), 1)
	forged := burnLog(14, 9, 2, big.NewInt(1_000_000), 1)
	n := &receiptNode{logs: []types.Log{real, forged}, receipts: receiptsOf(real)}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(chain.CreditsNothing(context.Background()), []common.Address{contract}, 10, 20)
	if err != nil || len(r.Burns) != 2 {
		t.Fatalf("BurnRange = %d burns, %v; want both, unchecked", len(r.Burns), err)
	}
	if got := n.calls("eth_getBlockReceipts"); got != 0 || obs.faultList() != "" {
		t.Fatalf("%d receipt calls, faults %q; want none", got, obs.faultList())
	}

	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	e, qobs, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, a.handle), serveNode(t, editLogs(b, forgeBurn)))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := e.BurnRange(chain.CreditsNothing(ctx), []common.Address{contract}, 80, 90)
	if err != nil {
		t.Fatal(err)
	}
	if keys, want := burnKeys(got.Burns), burnsOf(80, 90); keys != want {
		t.Fatalf("burns %s, want the serving endpoint's %s", keys, want)
	}
	if d := qobs.disagreements(); len(d) != 0 {
		t.Fatalf("disagreements %v, want none", d)
	}
	if err := e.Health(ctx); err != nil {
		t.Fatalf("Health = %v", err)
	}
	// Credited reads still need the quorum.
	if _, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90); !errors.Is(err, chain.ErrQuorumDisagreement) {
		t.Fatalf("BurnRange = %v, want ErrQuorumDisagreement", err)
	}
}
