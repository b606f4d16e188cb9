package poller_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// flappingChain is a lookingChain behind a balancer one of whose backends
// is stuck a block behind: while flap is set, every other read of the
// head (number or header) answers the block below the head, as that
// backend has it.
type flappingChain struct {
	*lookingChain
	flap  atomic.Bool
	reads atomic.Int64
}

// lags says this read of the head is the stuck backend's.
func (f *flappingChain) lags() bool {
	return f.flap.Load() && f.reads.Add(1)%2 == 0
}

func (f *flappingChain) HeadNumber(ctx context.Context) (uint64, error) {
	n, err := f.lookingChain.HeadNumber(ctx)
	if err == nil && n > 0 && f.lags() {
		n--
	}
	return n, err
}

func (f *flappingChain) Head(ctx context.Context) (chain.Header, error) {
	h, err := f.lookingChain.Head(ctx)
	if err == nil && h.Number > 0 && f.lags() {
		c := f.fakeChain
		c.mu.Lock()
		h = timed(c.header(h.Number - 1))
		c.mu.Unlock()
	}
	return h, err
}

// TestAStillHeadReadOneBlockLowerNowAndThenStillCountsAsStill: a chain
// that seals only on transactions stands at head 8; the replica has read
// 8 for far longer than a block takes. Its provider's balancer has one
// backend stuck at 7, so every other read of the head answers 7. The
// design counts a still head "from this replica's first read of the head
// at that number": 8 was first read long ago, so once the finality tag
// passes the burn in block 8, the polls that read 8 must read the target
// and credit it. Instead each read of 7 restarts the still clock
// (Loop.follow sets numberAt whenever the number differs from the last
// read), the polls reading 8 never read the target, and the polls reading
// 7 look only up to 7: the burn stays seen, the cursor at 7, for ever,
// while the target (8) has passed it and the replica reports ready.
func TestAStillHeadReadOneBlockLowerNowAndThenStillCountsAsStill(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	final := base.addBurn(3, 1, 0, 10)
	below := base.addBurn(7, 2, 0, 20)
	atHead := base.addBurn(8, 3, 0, 30)
	node := &flappingChain{lookingChain: &lookingChain{fakeChain: base}}
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	h.lcfg.MaxBlockTime = 100 * time.Millisecond
	l := h.followLoop(node)
	h.run(l)
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 2 })
	polls(t, l, 10) // 180 ms at 8: the head has stood still for longer than a block takes

	// The stuck backend joins the balancer; the tag passes block 7, then 8.
	node.flap.Store(true)
	base.setTarget(7)
	h.waitCursor(7)
	base.setTarget(8)

	// 50 polls (a second): eight times the still head's wait (120 ms).
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < 50 && h.cursor().Block != 8 && time.Now().Before(deadline); n++ {
		l.Signals.Idle.Wait(t, 10*time.Second)
	}
	if c := h.cursor(); c.Block != 8 || c.Hash != base.hash(8).Hex() {
		t.Fatalf("cursor %d %s 50 polls after the target passed block 8 (head 8, read as 7 every other poll), want 8 %s; asked %+v; pending %q; ready: %v",
			c.Block, c.Hash, base.hash(8).Hex(), node.asked(), h.pending(), l.Health())
	}
	if got := h.ledger(); !slices.Equal(got, expected(final, below, atHead)) {
		t.Fatalf("ledger %q", got)
	}
	if got := h.pending(); len(got) != 0 {
		t.Fatalf("pending %q after the burns were credited", got)
	}
}
