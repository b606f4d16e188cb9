package poller_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// TestOnePollReadsTheTargetOnce: the loop's poll and the head tracking
// pass after it share one read of the finality tag.
func TestOnePollReadsTheTargetOnce(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	node.setHead(8)
	final := node.addBurn(3, 1, 0, 10)
	atHead := node.addBurn(7, 2, 0, 20)
	h := newHarness(t, node)
	h.lcfg.Pending, h.lcfg.PendingMaxBlocks = true, 100
	h.lcfg.PollInterval = time.Hour // one poll, one pass
	l := h.loop()
	l.Signals.HeadTracked.Init()
	stop := h.run(l)
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := node.targetCalls(); got != 1 {
		t.Fatalf("%d reads of the target for one poll and its head tracking pass, want 1", got)
	}
	if got := h.ledger(); !slices.Equal(got, expected(final)) {
		t.Fatalf("ledger %q", got)
	}
	if got := h.pending(); !slices.Equal(got, pend(atHead)) {
		t.Fatalf("pending %q", got)
	}
}

// lookingChain is a fakeChain that also looks (chain.Endpoints' HeadNumber
// and Look), answering from the same chain, and counts what it is asked.
type lookingChain struct {
	*fakeChain
	mu                 sync.Mutex
	numbers, looks     int
	heads, rangesAsked int
}

func (f *lookingChain) CanLook() bool { return true }

func (f *lookingChain) HeadNumber(context.Context) (uint64, error) {
	f.mu.Lock()
	f.numbers++
	f.mu.Unlock()
	f.fakeChain.mu.Lock()
	defer f.fakeChain.mu.Unlock()
	return uint64(max(f.head, f.target, 0)), nil
}

func (f *lookingChain) Head(ctx context.Context) (chain.Header, error) {
	f.mu.Lock()
	f.heads++
	f.mu.Unlock()
	h, err := f.fakeChain.Head(ctx)
	return timed(h), err
}

// timed is h with the timestamp of a chain sealing every 12 s: the loop
// then reads the head's number between blocks (see Loop.headDue).
func timed(h chain.Header) chain.Header {
	h.Time = 1_700_000_000 + 12*h.Number
	return h
}

func (f *lookingChain) BurnRange(ctx context.Context, contracts []common.Address, from, to uint64) (chain.Range, error) {
	f.mu.Lock()
	f.rangesAsked++
	f.mu.Unlock()
	return f.fakeChain.BurnRange(ctx, contracts, from, to)
}

func (f *lookingChain) Look(_ context.Context, spec chain.LookSpec) (chain.Look, error) {
	f.mu.Lock()
	f.looks++
	f.mu.Unlock()
	c := f.fakeChain
	c.mu.Lock()
	defer c.mu.Unlock()
	if spec.Head > uint64(max(c.head, c.target)) {
		return chain.Look{}, chain.ErrNoLook
	}
	lk := chain.Look{Head: timed(c.header(spec.Head)), Target: chain.Target{Block: c.target, Highest: c.target}}
	if spec.Known != nil {
		lk.Head = *spec.Known
	}
	if to := min(c.target, int64(spec.Head)); to > spec.Cursor {
		r := c.rangeOf(spec.Contracts, uint64(spec.Cursor+1), uint64(to))
		lk.Credit = &r
	}
	if from := max(spec.Seen, uint64(c.target+1)); from <= spec.Head {
		r := c.rangeOf(spec.Contracts, from, spec.Head)
		lk.Pending = &r
	}
	if spec.Recheck {
		r := c.rangeOf(spec.Contracts, spec.RecheckFrom, uint64(spec.Cursor))
		lk.Recheck = &chain.Recheck{Cursor: c.header(uint64(spec.Cursor)), Burns: r.Burns, Rejected: r.Rejected}
	}
	return lk, nil
}

// asks counts what a lookingChain was asked.
type asks struct{ numbers, looks, targets, heads, ranges int }

// asked is what the node was asked so far.
func (f *lookingChain) asked() asks {
	f.mu.Lock()
	defer f.mu.Unlock()
	return asks{numbers: f.numbers, looks: f.looks, targets: f.targetCalls(), heads: f.heads, ranges: f.rangesAsked}
}

// polls waits until l has polled n times more from now (each poll at the
// target says so, following the chain or not).
func polls(t *testing.T, l *poller.Loop, n int) {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-l.Signals.Idle.C():
		default:
			drained = true
		}
	}
	for range n {
		l.Signals.Idle.Wait(t, 10*time.Second)
	}
}

// followLoop is a live loop with head tracking on node, its signals on.
func (h *harness) followLoop(node poller.Node) *poller.Loop {
	h.lcfg.Pending, h.lcfg.PendingMaxBlocks = true, 100
	h.metrics = poller.NewMetrics(prometheus.NewRegistry(), "test", "test", "test")
	w := poller.NewWriter(h.wcfg, h.store, node, h.metrics, h.log)
	l := poller.NewLoop(h.lcfg, w, h.metrics, poller.NewHeartbeat(), h.log)
	l.Signals.Committed.Init()
	l.Signals.Idle.Init()
	l.Signals.Latched.Init()
	l.Signals.Rescanned.Init()
	l.Signals.HeadTracked.Init()
	l.Signals.Failed.Init()
	return l
}

// follow runs a follow loop without rescans on base, a lookingChain over
// it, and waits for the loop's first head tracking pass and two polls
// after it: the replica keeps up with the chain.
func follow(t *testing.T, base *fakeChain) (*harness, *lookingChain, *poller.Loop) {
	t.Helper()
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	l := h.followLoop(node)
	h.run(l)
	l.Signals.HeadTracked.Wait(t, 10*time.Second)
	polls(t, l, 2)
	return h, node, l
}

// TestASlowChainIsAskedItsHeadNumberBetweenBlocks: once the heads'
// timestamps tell a block takes 12 s, the polls between two blocks ask the
// head's number (10 compute units), not its header (16), and the first
// poll a block time after the last move reads the header again.
func TestASlowChainIsAskedItsHeadNumberBetweenBlocks(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	_, node, l := follow(t, base)
	base.setHead(9) // a look: the block time is learnt from 8 and 9
	waitFor(t, 10*time.Second, "a look", func() bool { return node.asked().looks == 1 })
	polls(t, l, 1)
	before := node.asked()
	polls(t, l, 6) // the first may have read the head before the count
	after := node.asked()
	if after.heads != before.heads || after.numbers < before.numbers+5 || after.looks != 1 {
		t.Fatalf("asked %+v, then %+v over five polls between blocks: want head numbers only", before, after)
	}
}

// TestFollowingTheChainIsOneLookPerNewHead: caught up, a poll reads the
// head and nothing more while the head stands; when it moves, one look
// records what the target passed and what head tracking has not seen, with
// no read of the target or a range besides.
func TestFollowingTheChainIsOneLookPerNewHead(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	final := base.addBurn(3, 1, 0, 10)
	atHead := base.addBurn(7, 2, 0, 20)
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	l := h.followLoop(node)
	h.run(l)
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 1 })
	polls(t, l, 3)
	before := node.asked()
	if before.looks != 0 || before.numbers+before.heads == 0 {
		t.Fatalf("asked %+v: want polls reading the head, no look while nothing moved", before)
	}

	// The head moves and the target passes block 7.
	later := base.addBurn(9, 3, 0, 30)
	base.setHead(9)
	base.setTarget(7)
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Seen == 1 })
	h.waitCursor(7)
	after := node.asked()
	if after.looks != 1 {
		t.Fatalf("asked %+v, then %+v: want one look for the new head", before, after)
	}
	if after.targets != before.targets || after.ranges != before.ranges {
		t.Fatalf("asked %+v, then %+v: the target or a range read besides the look", before, after)
	}
	if got := h.ledger(); !slices.Equal(got, expected(final, atHead)) {
		t.Fatalf("ledger %q", got)
	}
	if got := h.pending(); !slices.Equal(got, pend(later)) {
		t.Fatalf("pending %q", got)
	}
}

// TestAReorganisationBetweenTwoCheapReadsIsCaught: on a chain whose
// blocks take longer than a poll, a block replaced at the head's height
// between two polls leaves the head's number as it was: the polls between
// blocks read nothing more (the trade of the cheap read), and the next
// block shows it (its parent is not the block head tracking read): head
// tracking starts again from the cursor, retracting the dropped burn and
// seeing the new one, as a pass reading the head itself does. A
// replacement that moves the head is caught by the first look.
func TestAReorganisationBetweenTwoCheapReadsIsCaught(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(7)
	h, node, l := follow(t, base)
	dropped := base.addBurn(8, 1, 0, 10)
	base.setHead(8) // a look; the heads' timestamps say 12 s a block
	waitFor(t, 10*time.Second, "the burn at the head pending", func() bool { return slices.Equal(h.pending(), pend(dropped)) })

	base.reorg(8)
	replaced := base.addBurnTx(8, common.HexToHash("0x88"), 2, 0, 20)
	// Four polls, of which the first may have read the head before the
	// count was taken: at least three head reads after it.
	numbers := node.asked().numbers
	polls(t, l, 4)
	if got := h.pending(); !slices.Equal(got, pend(dropped)) || node.asked().numbers < numbers+3 {
		t.Fatalf("pending %q after %+v before the next block, want the one seen before, head numbers only", got, node.asked())
	}

	next := base.addBurn(9, 3, 0, 30)
	base.setHead(9)
	waitFor(t, 10*time.Second, "the new branch pending", func() bool {
		return slices.Equal(h.pending(), pend(replaced, next))
	})
	want := []string{ev(1, "seen", dropped), ev(2, "retracted", dropped), ev(3, "seen", replaced), ev(4, "seen", next)}
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}

	// A replacement two blocks deep that moves the head: the first look.
	base.reorg(9)
	moved := base.addBurnTx(10, common.HexToHash("0x99"), 4, 0, 40)
	base.setHead(10)
	waitFor(t, 10*time.Second, "the second new branch pending", func() bool {
		return slices.Equal(h.pending(), pend(replaced, moved))
	})
}

// TestALookThatBreaksTheCursorLatches: the blocks a look credits must
// continue the cursor's block at the committed hash, as every read's: a
// chain replaced below the cursor latches a finality violation and writes
// nothing.
func TestALookThatBreaksTheCursorLatches(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	l := h.followLoop(node)
	h.run(l)
	h.waitCursor(5)
	polls(t, l, 2)
	base.reorg(4)
	base.addBurn(6, 1, 0, 10)
	base.setHead(9)
	base.setTarget(6)
	v := l.Signals.Latched.Wait(t, 10*time.Second)
	if v.Block != 5 || node.asked().looks == 0 {
		t.Fatalf("latched at %d after %+v, want block 5 through a look", v.Block, node.asked())
	}
	if c := h.cursor(); c.Block != 5 || len(h.ledger()) != 0 {
		t.Fatalf("cursor %d, ledger %q after the violation", c.Block, h.ledger())
	}
}

// TestARescanRidesTheLook: a rescan due while following the chain asks for
// its blocks in the look's eth_getLogs (no read of its own) and is done when
// the node's answer is what the ledger holds; when the node now gives a
// burn it left out before, the poll rescans as every rescan does and
// records it.
func TestARescanRidesTheLook(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	left := base.addBurn(4, 1, 0, 10)
	held := base.addBurn(5, 2, 0, 20)
	base.hidden[4] = true // left out by the node at first
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth, h.lcfg.RescanInterval = 10, 50*time.Millisecond
	l := h.followLoop(node)
	h.run(l)
	h.waitCursor(5)
	polls(t, l, 2)

	base.setHead(9) // a look, with the rescan due
	res := l.Signals.Rescanned.WaitUntil(t, 10*time.Second, func(poller.Totals) bool { return node.asked().looks > 0 })
	if res.Recovered != 0 || res.RescanFrom != 0 || res.RescanTo != 5 {
		t.Fatalf("rescan %+v", res)
	}
	ranges := node.asked().ranges
	if got := h.ledger(); !slices.Equal(got, expected(held)) {
		t.Fatalf("ledger %q", got)
	}

	base.mu.Lock()
	base.hidden[4] = false
	base.mu.Unlock()
	head := int64(9)
	waitFor(t, 10*time.Second, "the burn left out recovered", func() bool {
		head++
		base.setHead(head) // rescans ride looks: the head must move
		return slices.Equal(h.ledger(), expected(left, held))
	})
	res = l.Signals.Rescanned.WaitUntil(t, 10*time.Second, func(res poller.Totals) bool { return res.Recovered > 0 })
	if res.Recovered != 1 || node.asked().ranges == ranges {
		t.Fatalf("rescan %+v after %+v: want the burn recovered by a rescan's own read", res, node.asked())
	}
	if got := h.ledger(); !slices.Equal(got, expected(left, held)) {
		t.Fatalf("ledger %q", got)
	}
}

// TestComputeUnitsWeighEveryCall: burnpoller_rpc_compute_units_total adds
// each call's price by method, failed calls too (a provider bills them),
// by the default table until RPC_COMPUTE_UNITS gives another.
func TestComputeUnitsWeighEveryCall(t *testing.T) {
	t.Parallel()
	m := poller.NewMetrics(prometheus.NewRegistry(), "test", "test", "test")
	m.RPC("ep", "eth_getLogs", chain.ResultOK, 0)
	m.RPC("ep", "eth_getBlockReceipts", string(chain.ClassThrottled), 0)
	m.RPC("ep", "eth_unknownMethod", chain.ResultOK, 0)
	if got := testutil.ToFloat64(m.ComputeUnits.WithLabelValues("ep")); got != 575 {
		t.Fatalf("compute units %v, want 75 + 500", got)
	}
	m.WeighCalls(chain.Weights{"eth_getLogs": 1.5})
	m.RPC("ep", "eth_getLogs", chain.ResultOK, 0)
	m.RPC("ep", "eth_getBlockReceipts", chain.ResultOK, 0)
	if got := testutil.ToFloat64(m.ComputeUnits.WithLabelValues("ep")); got != 576.5 {
		t.Fatalf("compute units %v, want 575 + 1.5", got)
	}
}

// TestWithoutHeadTrackingTheLoopFollowsToo: with PENDING=false a replica
// keeping up reads the head, and a look only when it moved past the head
// its last look read; nothing above the target is kept.
func TestWithoutHeadTrackingTheLoopFollowsToo(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	final := base.addBurn(3, 1, 0, 10)
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth, h.lcfg.Pending = 0, false
	h.metrics = poller.NewMetrics(prometheus.NewRegistry(), "test", "test", "test")
	l := poller.NewLoop(h.lcfg, poller.NewWriter(h.wcfg, h.store, node, h.metrics, h.log), h.metrics, poller.NewHeartbeat(), h.log)
	l.Signals.Idle.Init()
	h.run(l)
	h.waitCursor(5)
	polls(t, l, 3) // the first look reads head 8; the others find it there
	before := node.asked()
	polls(t, l, 3)
	if after := node.asked(); after.looks != before.looks || after.targets != before.targets || after.ranges != before.ranges {
		t.Fatalf("asked %+v, then %+v while the head stood", before, after)
	}
	later := base.addBurn(7, 2, 0, 20)
	base.setHead(9)
	base.setTarget(7)
	h.waitCursor(7)
	if after := node.asked(); after.looks != before.looks+1 || after.targets != before.targets || after.ranges != before.ranges {
		t.Fatalf("asked %+v, then %+v for a new head: want one look", before, after)
	}
	if got := h.ledger(); !slices.Equal(got, expected(final, later)) {
		t.Fatalf("ledger %q", got)
	}
	if got := h.pending(); len(got) != 0 {
		t.Fatalf("pending %q without head tracking", got)
	}
}
