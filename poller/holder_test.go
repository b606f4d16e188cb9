package poller_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// holder is a test's say on which replica is the group's preferred
// holder.
type holder struct{ this, known atomic.Bool }

func (h *holder) Preferred() (bool, bool) { return h.this.Load(), h.known.Load() }

func newHolder(this, known bool) *holder {
	h := &holder{}
	h.this.Store(this)
	h.known.Store(known)
	return h
}

// reads is how many polls of l's metrics read the chain (committed or
// idle at the target).
func reads(m *poller.Metrics) float64 {
	return testutil.ToFloat64(m.Polls.WithLabelValues(poller.ResultCommitted)) + testutil.ToFloat64(m.Polls.WithLabelValues(poller.ResultIdle))
}

// TestThePreferredHolderReadsAndTheOthersDefer: of two replicas of a group
// at the target, the preferred holder reads the chain every interval and
// the other leaves the reads to it, taking the row only to look; once the
// holder stops, the other takes the group over; and the holder, back,
// takes it back from a replica catching up, without a burn recorded twice
// or lost.
func TestThePreferredHolderReadsAndTheOthersDefer(t *testing.T) {
	t.Parallel()
	node := newFakeChain(9)
	first := node.addBurn(4, 1, 0, 5)
	h := newHarness(t, node)
	h.lcfg.PollInterval = 200 * time.Millisecond

	h.lcfg.Holder = newHolder(true, true)
	a := h.loop()
	am := h.metrics
	stopA := h.run(a)
	a.Signals.Idle.Wait(t, 10*time.Second)

	h.lcfg.Holder = newHolder(false, true)
	b := h.loop()
	bm := h.metrics
	stopB := h.run(b)
	for range 5 {
		b.Signals.Standby.Wait(t, 10*time.Second)
	}
	if got := reads(bm); got != 0 {
		t.Fatalf("the replica that is not the preferred holder read the chain %v times while the holder read it", got)
	}
	if got := testutil.ToFloat64(am.Polls.WithLabelValues(poller.ResultStandby)); got != 0 {
		t.Fatalf("the preferred holder stood aside %v times", got)
	}

	// The holder stops (dead, frozen, cut off): the other takes over.
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	second := node.addBurn(12, 2, 0, 6)
	node.setTarget(15)
	b.Signals.Committed.Wait(t, 10*time.Second)
	h.waitCursor(15)

	// A long way to go: the other catches up, and the holder, back, takes
	// the group back from it rather than yielding to its moves.
	rest := []chain.Burn{node.addBurn(40, 3, 0, 7), node.addBurn(90, 4, 0, 8)}
	node.setTarget(100)
	h.lcfg.Holder = newHolder(true, true)
	a2 := h.loop()
	a2m := h.metrics
	h.run(a2)
	a2.Signals.Committed.Wait(t, 10*time.Second)
	h.waitCursor(100)
	for range 3 {
		b.Signals.Standby.Wait(t, 10*time.Second)
	}
	if testutil.ToFloat64(a2m.Polls.WithLabelValues(poller.ResultStandby)) != 0 {
		t.Fatal("the preferred holder stood aside on its return")
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	if got, want := h.ledger(), expected(append([]chain.Burn{first, second}, rest...)...); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWithoutAPreferenceReplicasShareReadsAsBefore: a holder that knows of
// no preference (no membership read yet, or this replica cut off) leaves
// the rules of a replica set of one group: a replica that takes the row
// within the interval of another's read skips.
func TestWithoutAPreferenceReplicasShareReadsAsBefore(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	h := newHarness(t, node)
	h.lcfg.PollInterval = time.Hour
	h.lcfg.Holder = newHolder(false, false)
	a := h.loop()
	h.run(a)
	a.Signals.Committed.Wait(t, 10*time.Second)
	b := h.loop()
	h.run(b)
	b.Signals.Skipped.Wait(t, 10*time.Second)
	if got := node.targetCalls(); got != 1 {
		t.Fatalf("%d reads of the target, want 1", got)
	}
}
