package chain_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// lookAt serves n and returns the endpoint set of its one client.
func (n *receiptNode) lookAt(t *testing.T, cfg chain.EndpointsConfig) (*chain.Endpoints, *faultObs) {
	t.Helper()
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	cfg.ChainID, cfg.Finality = 1337, chain.FinalityFinalized
	return chain.NewEndpoints([]*chain.Client{c}, cfg, obs, slog.New(slog.NewTextHandler(io.Discard, nil))), obs
}

// TestLookReadsTheHeadTheTargetAndTheLogsInOneBatch: a look at a chain
// kept up with is one batch (the head's header, the finality tag, one
// eth_getLogs from the cursor's block to the head) and the receipt of the
// burn it credits: the target's header lists one transaction, whose
// receipt costs 15 where the block's cost 500. The burn at the head is
// pending; the one between the target and where head tracking stands is
// neither (read before).
func TestLookReadsTheHeadTheTargetAndTheLogsInOneBatch(t *testing.T) {
	t.Parallel()
	final := burnLog(12, 1, 0, big.NewInt(5), 1)
	between := burnLog(15, 2, 0, big.NewInt(6), 1)
	atHead := burnLog(20, 3, 0, big.NewInt(7), 1)
	n := &receiptNode{logs: []types.Log{final, between, atHead}, receipts: receiptsOf(final, between, atHead),
		finalized: 12, head: 20, txs: map[uint64][]common.Hash{12: {final.TxHash}, 20: {atHead.TxHash}}}
	e, obs := n.lookAt(t, chain.EndpointsConfig{})
	lk, err := e.Look(context.Background(), chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 11, Seen: 20, Head: 20})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Target.Block != 12 || lk.Head.Number != 20 || lk.Head.Hash != hashOf(20) {
		t.Fatalf("target %d, head %d (%s)", lk.Target.Block, lk.Head.Number, lk.Head.Hash)
	}
	if lk.Credit == nil || lk.Credit.From.Number != 12 || lk.Credit.To.Number != 12 || burnKeys(lk.Credit.Burns) != "12/0/01=5" {
		t.Fatalf("credit %+v", lk.Credit)
	}
	if lk.Pending == nil || lk.Pending.From.Number != 20 || burnKeys(lk.Pending.Burns) != "20/0/03=7" {
		t.Fatalf("pending %+v", lk.Pending)
	}
	want := []string{
		"eth_getBlockByNumber+eth_getBlockByNumber+eth_getLogs",
		"eth_getTransactionReceipt",
	}
	if got := n.requestMethods()[1:]; !slices.Equal(got, want) { // after the chain id's check at first use
		t.Fatalf("requests %q, want %q", got, want)
	}
	if f := obs.faultList(); f != "" {
		t.Fatalf("faults %q", f)
	}
}

// TestLookTrustsWhatItCreditsNoMoreThanARange: what a look credits is
// checked as BurnRange checks a range: a burn no receipt holds is refused,
// a log naming another block hash than the canonical one is a bad reply,
// and the first block after the cursor is read (its parent is what the
// ledger's continuity rule checks) when the target moved further.
func TestLookTrustsWhatItCreditsNoMoreThanARange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 11, Seen: 20, Head: 20}
	real := burnLog(12, 1, 0, big.NewInt(5), 1)
	forged := burnLog(12, 9, 1, big.NewInt(1_000_000), 1)
	n := &receiptNode{logs: []types.Log{real, forged}, receipts: receiptsOf(real), finalized: 12, head: 20,
		txs: map[uint64][]common.Hash{12: {real.TxHash}}}
	e, obs := n.lookAt(t, chain.EndpointsConfig{})
	_, err := e.Look(ctx, spec)
	wantBadReply(t, err)
	if f := obs.faultList(); f != "unconfirmed_burn=1" {
		t.Fatalf("faults %q, want unconfirmed_burn=1", f)
	}

	moved := burnLog(14, 1, 0, big.NewInt(5), 1)
	moved.BlockHash = common.HexToHash("0xbad")
	n = &receiptNode{logs: []types.Log{moved}, receipts: receiptsOf(moved), finalized: 15, head: 20}
	e, _ = n.lookAt(t, chain.EndpointsConfig{})
	_, err = e.Look(ctx, spec)
	wantBadReply(t, err)

	ok := burnLog(14, 1, 0, big.NewInt(5), 1)
	n = &receiptNode{logs: []types.Log{ok}, receipts: receiptsOf(ok), finalized: 15, head: 20}
	e, _ = n.lookAt(t, chain.EndpointsConfig{})
	lk, err := e.Look(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if lk.Credit.From.Number != 12 || lk.Credit.From.ParentHash != hashOf(11) || lk.Credit.To.Number != 15 {
		t.Fatalf("credit [%d (parent %s), %d]", lk.Credit.From.Number, lk.Credit.From.ParentHash, lk.Credit.To.Number)
	}
	// After the chain id's check and the batch, the headers of block 12
	// (whose parent continues the cursor) and of block 14 (its logs'
	// block, whose transactions may cost less than its receipts), in one
	// request.
	if got := n.requestMethods()[2]; got != "eth_getBlockByNumber+eth_getBlockByNumber" {
		t.Fatalf("requests %q, want the headers of blocks 12 and 14 after the batch", n.requestMethods())
	}
}

// TestLookStandsAsideWhereItCannotServe: with a quorum, or from an
// endpoint behind the highest target seen, or for a head the node no
// longer has, a look says so (ErrNoLook) and the caller reads one read at
// a time.
func TestLookStandsAsideWhereItCannotServe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 11, Seen: 20, Head: 20}
	n := &receiptNode{finalized: 12, head: 20}
	e, _ := n.lookAt(t, chain.EndpointsConfig{Quorum: 2})
	if _, err := e.Look(ctx, spec); !errors.Is(err, chain.ErrNoLook) {
		t.Fatalf("Look with a quorum = %v, want ErrNoLook", err)
	}
	e, _ = n.lookAt(t, chain.EndpointsConfig{})
	if _, err := e.Look(ctx, spec); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.finalized = 10 // behind the 12 already seen
	n.mu.Unlock()
	if _, err := e.Look(ctx, spec); !errors.Is(err, chain.ErrNoLook) {
		t.Fatalf("Look through a lagging endpoint = %v, want ErrNoLook", err)
	}
	spec.Head = 21 // gone, or never there
	if _, err := e.Look(ctx, spec); !errors.Is(err, chain.ErrNoLook) {
		t.Fatalf("Look at a head the node lacks = %v, want ErrNoLook", err)
	}
}

// TestALookTheProviderRefusesTeachesItsLimit: a provider refusing the
// look's eth_getLogs range makes the look stand aside (ErrNoLook), and the
// range size it teaches keeps the caller, which looks only over spans
// within it, from asking again.
func TestALookTheProviderRefusesTeachesItsLimit(t *testing.T) {
	t.Parallel()
	n := node(100, 90)
	n.limit, n.limitErr = 10, func(uint64, uint64) error { return errors.New("block range too large") }
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 1000}, n)
	e.HintDensity(1000, 1) // sparse: ranges as wide as MaxRange
	if span := e.Span(); span != 1000 {
		t.Fatalf("span %d before the refusal", span)
	}
	_, err := e.Look(context.Background(), chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 50, Seen: 100, Head: 100})
	if !errors.Is(err, chain.ErrNoLook) {
		t.Fatalf("Look over a refused range = %v, want ErrNoLook", err)
	}
	if span := e.Span(); span > 25 {
		t.Fatalf("span %d after the provider refused 51 blocks, want it halved at least", span)
	}
	if _, err := e.Target(context.Background()); err != nil {
		t.Fatalf("the endpoint, which only refused a range, is not usable: %v", err)
	}
}

// TestALookAtAHeadReadAMomentAgo: when the caller read the head's header
// just before (a new block was due), the batch carries the target and the
// logs only; every block above the target then has its header read, and
// its bloom vouches for the reply: a burn the reply left out there is found
// in the block's receipts.
func TestALookAtAHeadReadAMomentAgo(t *testing.T) {
	t.Parallel()
	hidden := burnLog(19, 4, 0, big.NewInt(8), 1)
	n := &receiptNode{receipts: receiptsOf(hidden), finalized: 12, head: 20,
		blooms: map[uint64]types.Bloom{19: burnBloom(contract)}}
	e, obs := n.lookAt(t, chain.EndpointsConfig{})
	ctx := context.Background()
	head, err := e.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := e.Look(ctx, chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 12, Seen: 18, Head: 20, Known: &head})
	if err != nil {
		t.Fatal(err)
	}
	if lk.Head.Hash != hashOf(20) || lk.Pending == nil || lk.Pending.From.Number != 18 || burnKeys(lk.Pending.Burns) != "19/0/04=8" {
		t.Fatalf("look %+v, pending %+v", lk, lk.Pending)
	}
	if f := obs.faultList(); f != "hidden_burn=1" {
		t.Fatalf("faults %q, want hidden_burn=1", f)
	}
	want := []string{
		"eth_chainId", "eth_getBlockByNumber", // the head, read by the caller
		"eth_getBlockByNumber+eth_getLogs",          // the target and the logs
		"eth_getBlockByNumber+eth_getBlockByNumber", // blocks 18 and 19, for their blooms
		"eth_getBlockReceipts",                      // block 19, whose bloom holds a burn
	}
	if got := n.requestMethods(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
}

// TestALookAsksAFinalityWindowBeforeRangesGrew: a replica that has read
// one block at a time (its ranges' density still the first 16-block
// probe's) still looks over a finality window in one eth_getLogs; a window
// wider than a look may ask stands aside without a call.
func TestALookAsksAFinalityWindowBeforeRangesGrew(t *testing.T) {
	t.Parallel()
	n := node(200, 100)
	e, _, _ := newEndpoints(t, chain.EndpointsConfig{MaxRange: 2000, GrowTo: 100_000}, n)
	if span := e.Span(); span != 16 {
		t.Fatalf("span %d, want the first probe's 16", span)
	}
	ctx := context.Background()
	if _, err := e.Look(ctx, chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 99, Seen: 150, Head: 164}); err != nil {
		t.Fatalf("Look over 66 blocks: %v", err)
	}
	asked := len(n.requested())
	if _, err := e.Look(ctx, chain.LookSpec{Contracts: []common.Address{contract}, Cursor: 0, Seen: 150, Head: 200}); !errors.Is(err, chain.ErrNoLook) {
		t.Fatalf("Look over 201 blocks = %v, want ErrNoLook", err)
	}
	if got := len(n.requested()); got != asked {
		t.Fatalf("%d eth_getLogs after a look too wide, want %d", got, asked)
	}
}
