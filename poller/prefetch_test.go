package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
)

// spanNode is a chain of empty blocks at the RPC boundary: it plans ranges
// of span blocks but answers at most cap of them, and then plans cap (as
// chain.Endpoints learns a provider's limit); a test may hold the reply for
// a range until it releases it.
type spanNode struct {
	span, cap uint64
	mu        sync.Mutex
	asked     [][2]uint64
	hold      map[uint64]chan struct{} // by first block: wait on it
	answered  chan uint64              // the first block of every reply, as it goes
}

func (n *spanNode) header(b uint64) chain.Header {
	return chain.Header{Number: b, Hash: common.BigToHash(new(big.Int).SetUint64(b + 1)), ParentHash: common.BigToHash(new(big.Int).SetUint64(b))}
}

func (n *spanNode) BurnRange(ctx context.Context, _ []common.Address, from, to uint64) (chain.Range, error) {
	n.mu.Lock()
	n.asked = append(n.asked, [2]uint64{from, to})
	hold := n.hold[from]
	n.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return chain.Range{}, ctx.Err()
		}
	}
	if n.cap > 0 && to-from+1 > n.cap {
		to = from + n.cap - 1
		n.mu.Lock()
		n.span = n.cap
		n.mu.Unlock()
	}
	if n.answered != nil {
		n.answered <- from
	}
	return chain.Range{From: n.header(from), To: n.header(to)}, nil
}

func (n *spanNode) Span() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.span
}

func (n *spanNode) Target(context.Context) (chain.Target, error) { return chain.Target{}, nil }
func (n *spanNode) Headers(context.Context, []uint64) (map[uint64]chain.Header, error) {
	return nil, fmt.Errorf("not asked")
}
func (n *spanNode) Head(context.Context) (chain.Header, error) { return chain.Header{}, nil }
func (n *spanNode) HintDensity(uint64, int)                    {}

func spans(rs []chain.Range) string {
	s := ""
	for _, r := range rs {
		s += fmt.Sprintf("[%d %d]", r.From.Number, r.To.Number)
	}
	return s
}

// TestPrefetcherHandsRangesOverInChainOrder: with ranges in flight, a later
// range's reply arriving first waits its turn.
func TestPrefetcherHandsRangesOverInChainOrder(t *testing.T) {
	t.Parallel()
	first := make(chan struct{})
	n := &spanNode{span: 10, hold: map[uint64]chan struct{}{10: first}, answered: make(chan uint64, 8)}
	p := newPrefetcher(context.Background(), n, nil, 100, nil, 0, 39, time.Now().Add(time.Hour))
	defer p.Stop()
	p.window = maxWindow
	var got []chain.Range
	r, err := p.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, r)
	// [10, 19] is held; [20, 29] and [30, 39] answer first.
	var order []uint64
	for range 3 {
		order = append(order, <-n.answered)
	}
	if fmt.Sprint(order) != "[0 20 30]" && fmt.Sprint(order) != "[0 30 20]" {
		t.Fatalf("replies in order %v, want block 0's, then 20's and 30's before 10's", order)
	}
	close(first)
	for range 3 {
		r, err := p.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if want := "[0 9][10 19][20 29][30 39]"; spans(got) != want {
		t.Fatalf("ranges %s, want %s", spans(got), want)
	}
}

// TestPrefetcherReplansAfterAShortReply: a range that ends short of its
// plan (the provider's limit, learned) drops the plans after it, and the
// blocks after it are planned again at the learned size: the ranges handed
// over are contiguous, and none is asked twice.
func TestPrefetcherReplansAfterAShortReply(t *testing.T) {
	t.Parallel()
	n := &spanNode{span: 10, cap: 4}
	p := newPrefetcher(context.Background(), n, nil, 100, nil, 5, 24, time.Now().Add(time.Hour))
	defer p.Stop()
	p.window = maxWindow
	var got []chain.Range
	for range 5 {
		r, err := p.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if want := "[5 8][9 12][13 16][17 20][21 24]"; spans(got) != want {
		t.Fatalf("ranges %s, want %s", spans(got), want)
	}
	// Asked at the same time, so in any order.
	n.mu.Lock()
	asked := slices.Clone(n.asked)
	n.mu.Unlock()
	slices.SortFunc(asked, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	if want := "[[5 14] [9 12] [13 16] [17 20] [21 24]]"; fmt.Sprint(asked) != want {
		t.Fatalf("asked %v, want %s", asked, want)
	}
	if _, err := p.Next(context.Background()); err == nil {
		t.Fatal("Next after the last block succeeded")
	}
}

// TestPrefetcherWindow: the window covers the round trip while ranges are
// sparse and recording is quick, and is two otherwise.
func TestPrefetcherWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		fetch, write time.Duration
		logs         int
		want         int
	}{
		{"distant provider, sparse", 80 * time.Millisecond, time.Millisecond, 3, maxWindow},
		{"recording half the round trip", 80 * time.Millisecond, 40 * time.Millisecond, 3, 3},
		{"recording slower than fetching", 10 * time.Millisecond, 100 * time.Millisecond, 3, minWindow},
		{"dense ranges", 80 * time.Millisecond, time.Millisecond, 2000, minWindow},
		{"nothing measured", 0, 0, 0, maxWindow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &Writer{}
			p := &prefetcher{memory: &w.window, window: minWindow, fetchTook: tt.fetch}
			p.Recorded(tt.write, tt.logs)
			if p.window != tt.want {
				t.Fatalf("window %d, want %d", p.window, tt.want)
			}
			// The writer's next transaction starts with it.
			next := newPrefetcher(context.Background(), &spanNode{span: 1}, nil, 1, &w.window, 0, 1, time.Now())
			defer next.Stop()
			if next.window != tt.want {
				t.Fatalf("next transaction's window %d, want %d", next.window, tt.want)
			}
		})
	}
}

// TestPrefetcherReadyOnlyForAWholeRange: past the budget, a range that has
// arrived is recorded; one still in flight, or whose fetch failed, is not
// waited for, and the transaction commits what it has.
func TestPrefetcherReadyOnlyForAWholeRange(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	n := &spanNode{span: 10, hold: map[uint64]chan struct{}{10: held}, answered: make(chan uint64, 8)}
	p := newPrefetcher(context.Background(), n, nil, 100, nil, 0, 39, time.Now().Add(time.Hour))
	defer p.Stop()
	if _, err := p.Next(context.Background()); err != nil { // [0, 9]; [10, 19] goes in flight, held
		t.Fatal(err)
	}
	<-n.answered
	if p.Ready() {
		t.Fatal("Ready while the next range is held")
	}
	close(held)
	<-n.answered
	<-p.queue[0].done // the node's reply is in; its fetch ends a moment later
	if !p.Ready() {
		t.Fatal("not Ready once the next range arrived")
	}
	p.queue[0].err = errors.New("injected")
	if p.Ready() {
		t.Fatal("Ready for a range whose fetch failed")
	}
}
