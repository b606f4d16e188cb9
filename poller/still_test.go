package poller_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/testsignal"
	"github.com/burnpoller/burnpoller/poller"
)

// drain empties a signal's buffer.
func drain[T any](s *testsignal.Signal[T]) {
	for {
		select {
		case <-s.C():
		default:
			return
		}
	}
}

// stillHead is a chain standing at head 8 with burns in blocks 3 and 7
// and its target at 5 (a chain that seals only when it has a
// transaction), followed by a replica with head tracking, no rescans, and
// 100 ms for a block at most. It returns once the replica saw the burn of
// block 7 and the head has stood still for longer than a block takes:
// ten polls (nine intervals, 180 ms) after the first that read it.
func stillHead(t *testing.T) (h *harness, base *fakeChain, node *lookingChain, l *poller.Loop, final, atHead chain.Burn) {
	t.Helper()
	base = newFakeChain(5)
	base.setHead(8)
	final = base.addBurn(3, 1, 0, 10)
	atHead = base.addBurn(7, 2, 0, 20)
	node = &lookingChain{fakeChain: base}
	h = newHarness(t, base)
	h.lcfg.RescanDepth = 0
	h.lcfg.MaxBlockTime = 100 * time.Millisecond
	l = h.followLoop(node)
	h.run(l)
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 1 })
	polls(t, l, 10)
	return h, base, node, l, final, atHead
}

// TestAStillHeadsBurnIsCreditedWhenTheTargetPassesIt: on a chain that
// seals only when it has a transaction, the finality target passes the
// last blocks while the head stands still. Once the head has stood still
// for longer than a block takes, each poll reads the target, so a burn the
// target passes is credited by the poll after the one in flight, with no
// new block: confirmed, its pending row gone, the cursor at the target.
// Once the cursor is at the head, the polls read the head alone (the
// target cannot pass it), and each says where the target stands.
func TestAStillHeadsBurnIsCreditedWhenTheTargetPassesIt(t *testing.T) {
	t.Parallel()
	h, base, node, l, final, atHead := stillHead(t)
	before := node.asked()

	drain(&l.Signals.Idle)
	base.setTarget(8)
	// The poll in flight may have read the target before it moved; the
	// next one credits, and the one after finds the cursor at the head.
	stale := 0
	l.Signals.Idle.WaitUntil(t, 10*time.Second, func(cursor int64) bool {
		if cursor == 5 {
			stale++
		}
		return cursor == 8
	})
	if stale > 1 {
		t.Fatalf("%d polls left the cursor at 5 after the target passed the burn, want at most the one in flight", stale)
	}
	after := node.asked()
	if after.looks != before.looks || after.ranges == before.ranges {
		t.Fatalf("asked %+v, then %+v: want the target's blocks read as a range, no look (the head stood still)", before, after)
	}
	if c := h.cursor(); c.Block != 8 || c.Hash != base.hash(8).Hex() {
		t.Fatalf("cursor %d %s, want 8 %s", c.Block, c.Hash, base.hash(8).Hex())
	}
	if got := h.ledger(); !slices.Equal(got, expected(final, atHead)) {
		t.Fatalf("ledger %q", got)
	}
	want := []string{ev(1, "confirmed", final), ev(2, "seen", atHead), ev(3, "confirmed", atHead)}
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if got := h.pending(); len(got) != 0 {
		t.Fatalf("pending %q after the burn was credited", got)
	}

	// An idle chain: the head still, the cursor at it and at the target.
	polls(t, l, 1)
	idle := node.asked()
	checked := testutil.ToFloat64(h.metrics.TargetChecked)
	polls(t, l, 4)
	if got := node.asked(); got.targets != idle.targets || got.looks != idle.looks || got.ranges != idle.ranges {
		t.Fatalf("asked %+v, then %+v over four polls of an idle chain: want the head alone", idle, got)
	}
	if got := testutil.ToFloat64(h.metrics.TargetChecked); !(got > checked) {
		t.Fatalf("burnpoller_target_checked_timestamp_seconds %v, then %v over four polls of an idle chain", checked, got)
	}
	for name, g := range map[string]float64{
		"head": testutil.ToFloat64(h.metrics.HeadBlock), "target": testutil.ToFloat64(h.metrics.TargetBlock),
		"cursor": testutil.ToFloat64(h.metrics.CursorBlock),
	} {
		if g != 8 {
			t.Errorf("%s block %v on an idle chain, want 8", name, g)
		}
	}
	if err := l.Health(); err != nil {
		t.Fatalf("an idle chain's replica is not ready: %v", err)
	}
}

// blindChain is a lookingChain whose finality tag stops answering while
// blind is set.
type blindChain struct {
	*lookingChain
	blind atomic.Bool
}

func (b *blindChain) Target(ctx context.Context) (chain.Target, error) {
	if b.blind.Load() {
		return chain.Target{}, errors.New("finalized: not found")
	}
	return b.lookingChain.Target(ctx)
}

// TestAHolderThatCannotReadTheTargetIsTakenOver: the group's preferred
// holder marks the group polled only with the target read (or the cursor
// provably at it). When its node stops answering for the target of a
// still head, its polls fail and mark nothing, so the other replica,
// which deferred to it, takes the group over and credits the burn the
// target passed.
func TestAHolderThatCannotReadTheTargetIsTakenOver(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	final := base.addBurn(3, 1, 0, 10)
	atHead := base.addBurn(7, 2, 0, 20)
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	h.lcfg.PollInterval = 50 * time.Millisecond
	h.lcfg.MaxBlockTime = 100 * time.Millisecond

	nodeA := &blindChain{lookingChain: &lookingChain{fakeChain: base}}
	h.lcfg.Holder = newHolder(true, true)
	a := h.followLoop(nodeA)
	h.run(a)
	a.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 1 })
	polls(t, a, 4) // 150 ms: the head has stood still for longer than a block takes

	h.lcfg.Holder = newHolder(false, true)
	b := h.followLoop(&lookingChain{fakeChain: base})
	b.Signals.Standby.Init()
	h.run(b)
	for range 3 {
		b.Signals.Standby.Wait(t, 10*time.Second)
	}
	if got := reads(h.metrics); got != 0 {
		t.Fatalf("the other replica read the chain %v times while the holder read it", got)
	}

	// The holder's node stops answering for the target: its polls, which
	// read it at every poll of a still head with the cursor below, fail
	// and mark nothing. Only then does the target pass the burn: were it
	// first, the other replica could credit it before the holder's next
	// poll, which would then find the cursor at the head and read nothing.
	nodeA.blind.Store(true)
	if err := a.Signals.Failed.Wait(t, 10*time.Second); !strings.Contains(err.Error(), "reading the target of a head standing still") {
		t.Fatalf("the holder failed with %v", err)
	}
	base.setTarget(8)
	h.waitCursor(8)
	b.Signals.Committed.Wait(t, 10*time.Second)
	if got := h.ledger(); !slices.Equal(got, expected(final, atHead)) {
		t.Fatalf("ledger %q", got)
	}
}

// TestARescanIsDoneOnAStillHead: a rescan due while the head stands still
// rides a look as it does on a moving chain; a burn the node left out of
// a committed block and now gives is recovered with no new block.
func TestARescanIsDoneOnAStillHead(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	left := base.addBurn(4, 1, 0, 10)
	held := base.addBurn(5, 2, 0, 20)
	base.hidden[4] = true // left out by the node at first
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth, h.lcfg.RescanInterval = 10, 50*time.Millisecond
	h.lcfg.MaxBlockTime = 100 * time.Millisecond
	l := h.followLoop(node)
	h.run(l)
	h.waitCursor(5)
	polls(t, l, 2)
	if got := h.ledger(); !slices.Equal(got, expected(held)) {
		t.Fatalf("ledger %q", got)
	}

	base.mu.Lock()
	base.hidden[4] = false
	base.mu.Unlock()
	res := l.Signals.Rescanned.WaitUntil(t, 10*time.Second, func(res poller.Totals) bool { return res.Recovered > 0 })
	if res.Recovered != 1 || node.asked().looks == 0 {
		t.Fatalf("rescan %+v after %+v: want the burn recovered after a look", res, node.asked())
	}
	if got := h.ledger(); !slices.Equal(got, expected(left, held)) {
		t.Fatalf("ledger %q", got)
	}
	if c := h.cursor(); c.Block != 5 {
		t.Fatalf("cursor %d, want 5", c.Block)
	}
}

// TestAReplicaBackAtTheReadsOfAMovingChainReadsNoTarget: replicas of a
// group take turns at the reads (here: the preferred holder changes).
// While one read the blocks of a moving chain, the other read none; back
// at the reads, it finds the head where the first's head tracking left
// it, a block time after the last block it read itself. That head moved
// all the same: its poll reads no target, as between two blocks.
func TestAReplicaBackAtTheReadsOfAMovingChainReadsNoTarget(t *testing.T) {
	t.Parallel()
	base := newFakeChain(5)
	base.setHead(8)
	node := &lookingChain{fakeChain: base}
	h := newHarness(t, base)
	h.lcfg.RescanDepth = 0
	h.lcfg.MaxBlockTime = time.Second
	ha, hb := newHolder(true, true), newHolder(false, true)
	h.lcfg.Holder = ha
	a := h.followLoop(node)
	h.run(a)
	a.Signals.HeadTracked.Wait(t, 10*time.Second)
	// Two looks of its own: a learns the block time (12 s by the heads'
	// timestamps, so MaxBlockTime, 1 s, bounds it), and its polls between
	// blocks read the head's number.
	for head := int64(9); head <= 10; head++ {
		base.setHead(head)
		a.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Head.Number == uint64(head) })
	}
	h.lcfg.Holder = hb
	b := h.followLoop(node)
	h.run(b)

	// b reads the next blocks, for longer than a block may take.
	ha.this.Store(false)
	hb.this.Store(true)
	for head := int64(11); head <= 24; head++ {
		base.setTarget(head - 3)
		base.setHead(head)
		time.Sleep(100 * time.Millisecond) // the chain's block time, not an assertion
	}
	b.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Head.Number == 24 })

	before := node.asked()
	drain(&a.Signals.Idle)
	ha.this.Store(true)
	hb.this.Store(false)
	a.Signals.Idle.Wait(t, 10*time.Second)
	a.Signals.Idle.Wait(t, 10*time.Second)
	if after := node.asked(); after.targets != before.targets {
		t.Fatalf("asked %+v, then %+v: the replica back at the reads read the target of a moving chain", before, after)
	}
}
