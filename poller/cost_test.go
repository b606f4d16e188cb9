package poller_test

import (
	"slices"
	"testing"
	"time"

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
