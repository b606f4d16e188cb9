package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"
)

// testSizer is a sizer with MAX_BLOCK_RANGE 1000, growth up to 10,000, a
// target of 2,000 logs, growth back after 10 successes, and density d.
func testSizer(d uint64) rangeSizer {
	s := newRangeSizer(EndpointsConfig{MaxRange: 1000, GrowTo: 10_000, GrowAfter: 10, FastReply: time.Second, TargetLogs: 2000})
	s.density = d
	return s
}

func TestRangeSizerStartsWithAProbe(t *testing.T) {
	t.Parallel()
	s := newRangeSizer(EndpointsConfig{MaxRange: 1000, GrowTo: 10_000, TargetLogs: 2000})
	l := s.newLimit()
	if got := s.span(&l); got != 16 {
		t.Fatalf("first span = %d, want a 16-block probe", got)
	}
	small := newRangeSizer(EndpointsConfig{MaxRange: 5, GrowTo: 5, TargetLogs: 2000})
	l = small.newLimit()
	if got := small.span(&l); got != 5 {
		t.Fatalf("first span with MAX_BLOCK_RANGE=5 = %d, want 5", got)
	}
}

func TestRangeSizerLearn(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                 string
		density, span, logSp uint64
		logs                 int
		want                 uint64
	}{
		{"empty range as large as the density grows 8-fold", 16, 16, 16, 0, 128},
		{"growth stops at GrowTo", 5000, 5000, 5000, 0, 10_000},
		{"a sparse reply grows by as many times as it is under half the target", 100, 100, 100, 249, 400},
		{"a reply just under half the target grows by 2", 100, 100, 100, 999, 200},
		{"a range smaller than the density (the limit held it) teaches nothing sparse", 100, 50, 50, 0, 100},
		{"a dense reply shrinks in proportion", 100, 100, 100, 4000, 50},
		{"dense from its first log on: sized by the blocks from there", 100, 100, 20, 4000, 10},
		{"never below one block", 100, 100, 1, 100_000, 1},
		{"near the target throughout: unchanged", 100, 100, 100, 1500, 100},
		{"near the target, all of it late in the range: narrower", 100, 100, 40, 1500, 53},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := testSizer(tt.density)
			s.learn(tt.span, tt.logSp, tt.logs)
			if s.density != tt.want || !s.learned {
				t.Fatalf("density = %d (learned %v), want %d", s.density, s.learned, tt.want)
			}
		})
	}
}

func TestRangeSizerGrow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		density   uint64
		limit     rangeLimit
		span      uint64
		logs      int
		took      time.Duration
		want      rangeLimit
		changed   bool
		wantSpan  uint64
		wantDense uint64
	}{
		{
			name: "below MaxRange, the tenth success grows it back by a quarter", density: 10_000,
			limit: rangeLimit{limit: 400, okStreak: 9}, span: 400, logs: 10, took: time.Millisecond,
			want: rangeLimit{limit: 500}, changed: true,
		},
		{
			name: "below MaxRange, before the tenth success nothing", density: 10_000,
			limit: rangeLimit{limit: 400, okStreak: 3}, span: 400, logs: 10, took: time.Millisecond,
			want: rangeLimit{limit: 400, okStreak: 4},
		},
		{
			name: "growing back stops at MaxRange", density: 10_000,
			limit: rangeLimit{limit: 900, okStreak: 9}, span: 900, logs: 10, took: time.Millisecond,
			want: rangeLimit{limit: 1000}, changed: true,
		},
		{
			name: "at MaxRange a small fast full range grows past it", density: 1000,
			limit: rangeLimit{limit: 1000}, span: 1000, logs: 0, took: time.Millisecond,
			want: rangeLimit{limit: 8000}, changed: true,
		},
		{
			name: "a slow reply does not grow it", density: 1000,
			limit: rangeLimit{limit: 1000}, span: 1000, logs: 0, took: 2 * time.Second,
			want: rangeLimit{limit: 1000, okStreak: 1},
		},
		{
			name: "a range shorter than asked (the head) does not grow it", density: 1000,
			limit: rangeLimit{limit: 1000}, span: 10, logs: 0, took: time.Millisecond,
			want: rangeLimit{limit: 1000, okStreak: 1},
		},
		{
			name: "a reply over half the target does not grow it", density: 1000,
			limit: rangeLimit{limit: 1000}, span: 1000, logs: 1000, took: time.Millisecond,
			want: rangeLimit{limit: 1000, okStreak: 1},
		},
		{
			name: "growth stops at a provider's cap", density: 10_000,
			limit: rangeLimit{limit: 2000, cap: 3000}, span: 2000, logs: 0, took: time.Millisecond,
			want: rangeLimit{limit: 3000, cap: 3000}, changed: true,
		},
		{
			name: "a cap is tried a quarter higher after a hundred successes", density: 10_000,
			limit: rangeLimit{limit: 3000, cap: 3000, okStreak: 99}, span: 3000, logs: 3000, took: time.Millisecond,
			want: rangeLimit{limit: 3750, cap: 3750}, changed: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := testSizer(tt.density)
			l := tt.limit
			if changed := s.grow(&l, tt.span, tt.logs, tt.took); changed != tt.changed || l != tt.want {
				t.Fatalf("grow = %v, %+v; want %v, %+v", changed, l, tt.changed, tt.want)
			}
		})
	}
}

// TestRangeSizerRead: a success grows the limit with the density as it
// stood, then learns the density from the reply.
func TestRangeSizerRead(t *testing.T) {
	t.Parallel()
	s := testSizer(1000)
	l := s.newLimit()
	if !s.read(&l, 1000, 1000, 0, time.Millisecond) {
		t.Fatal("a small fast full range did not grow the limit")
	}
	if l.limit != 8000 || s.density != 8000 || s.span(&l) != 8000 {
		t.Fatalf("limit %d, density %d, span %d; want 8000 each", l.limit, s.density, s.span(&l))
	}
	if s.read(&l, 8000, 100, 4000, time.Millisecond) {
		t.Fatal("a dense reply grew the limit")
	}
	if s.density != 50 || s.span(&l) != 50 {
		t.Fatalf("density %d, span %d after 4000 logs in the last 100 blocks; want 50", s.density, s.span(&l))
	}
}

func TestRangeSizerRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		from, to uint64
		rl       RangeLimit
		want     rangeLimit
	}{
		{"no hint: half", 1, 1000, RangeLimit{}, rangeLimit{limit: 500}},
		{"a stated limit", 1, 1000, RangeLimit{MaxBlocks: 100}, rangeLimit{limit: 100}},
		{"a suggested range from the same block", 1, 1000, RangeLimit{Suggested: true, From: 1, To: 300}, rangeLimit{limit: 300}},
		{"a suggested range elsewhere: its length", 1, 1000, RangeLimit{Suggested: true, From: 50, To: 99}, rangeLimit{limit: 50}},
		{"a stated limit not smaller: half", 1, 1000, RangeLimit{MaxBlocks: 5000}, rangeLimit{limit: 500}},
		{"above MaxRange the refusal is a cap, kept", 1, 4000, RangeLimit{MaxBlocks: 3000}, rangeLimit{limit: 3000, cap: 3000}},
		{"two blocks: one", 7, 8, RangeLimit{}, rangeLimit{limit: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := testSizer(10_000)
			l := rangeLimit{limit: 5000, okStreak: 7}
			next := s.refused(&l, tt.from, tt.to, tt.rl)
			if l != tt.want || next != tt.want.limit {
				t.Fatalf("refused = %d, %+v; want %+v", next, l, tt.want)
			}
		})
	}
}

func TestRangeSizerTimedOut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		span      uint64
		changed   bool
		want      rangeLimit
		wantDense uint64
	}{
		{"above MaxRange: halved and kept as the cap", 8000, true, rangeLimit{limit: 4000, cap: 4000}, 4000},
		{"not below MaxRange", 1500, true, rangeLimit{limit: 1000, cap: 1000}, 1000},
		{"at MaxRange a timeout teaches nothing about size", 1000, false, rangeLimit{limit: 8000, okStreak: 3}, 8000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := testSizer(8000)
			l := rangeLimit{limit: 8000, okStreak: 3}
			if changed := s.timedOut(&l, tt.span); changed != tt.changed || l != tt.want || s.density != tt.wantDense {
				t.Fatalf("timedOut = %v, %+v, density %d; want %v, %+v, %d", changed, l, s.density, tt.changed, tt.want, tt.wantDense)
			}
		})
	}
}

func TestRangeSizerTooLargeAndHint(t *testing.T) {
	t.Parallel()
	s := testSizer(16)
	s.hint(1000, 0) // no logs: no hint
	if s.density != 16 {
		t.Fatalf("density after an empty hint = %d, want 16", s.density)
	}
	s.hint(1000, 4000)
	if s.density != 500 {
		t.Fatalf("density after 4000 logs over 1000 blocks = %d, want 500", s.density)
	}
	if next := s.tooLarge(500, 100, cutReply{seen: true, first: 100, blocks: 10, logs: 4000}); next != 5 || s.density != 5 {
		t.Fatalf("tooLarge = %d, density %d; want 5", next, s.density)
	}
	s.learn(5, 5, 10) // sparse: 8 times wider
	s.hint(1000, 1)   // a learned density is not overridden
	if s.density != 40 {
		t.Fatalf("density after a hint once learned = %d, want 40", s.density)
	}
}

func TestCoolDown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"unreachable", &Error{Class: ClassTransient, Err: errors.New("connection refused")}, 5 * time.Second},
		{"throttled without Retry-After", &Error{Class: ClassThrottled, Err: errors.New("429")}, 5 * time.Second},
		{"throttled with a long Retry-After", &Error{Class: ClassThrottled, RetryAfter: 30 * time.Second, Err: errors.New("429")}, 30 * time.Second},
		{"permanent", &Error{Class: ClassPermanent, Err: errors.New("401")}, time.Minute},
		{"a one-block range refusal", &Error{Class: ClassRangeLimit, Err: fmt.Errorf("%w", ErrRangeAtOneBlock)}, time.Minute},
		{"a reply over the cap outside a log range", &Error{Class: ClassRangeLimit, Err: ErrResponseTooLarge}, 5 * time.Second},
		{"a bad reply", &Error{Class: ClassBadReply, Err: ErrBadReply}, 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := coolDown(ClassOf(tt.err), tt.err); got != tt.want {
				t.Fatalf("coolDown = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEndpointHealth(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	h := newEndpointHealth()
	if h.prunedFor(0) || h.cooling(now) || h.unusable() != nil {
		t.Fatal("a new endpoint is not usable")
	}
	h.pruned(100)
	h.pruned(50) // an older refusal does not lower it
	if !h.prunedFor(100) || !h.prunedFor(0) || h.prunedFor(101) {
		t.Fatalf("pruned below %d: want blocks up to 100 passed over, 101 asked", h.prunedBelow)
	}
	h.failed(ClassRangeLimit, now.Add(time.Minute))
	h.stuck = true
	if !h.cooling(now) || h.cooling(now.Add(time.Minute)) {
		t.Fatal("cooling: want until the minute is over")
	}
	h.served() // a target says nothing about a range refusal
	if h.lastClass != ClassRangeLimit || h.unusable() == nil {
		t.Fatalf("after a served target: class %q, unusable %v; want the range refusal kept", h.lastClass, h.unusable())
	}
	h.succeeded()
	if h.cooling(now) || h.unusable() != nil || !h.prunedFor(100) {
		t.Fatal("a success clears the failure but not what history the endpoint lacks")
	}
	h.failed(ClassPermanent, now)
	if err := h.unusable(); err == nil || err.Error() != "permanent error" {
		t.Fatalf("unusable after a permanent error = %v", err)
	}
	h.served()
	if h.unusable() != nil {
		t.Fatal("a served target clears a permanent error")
	}
}

// TestFailoverAsksEachEndpointOnce: run asks endpoints in order, each
// once, passes over a failed one, and stops when take says done; with
// every endpoint failed it returns the last error.
func TestFailoverAsksEachEndpointOnce(t *testing.T) {
	t.Parallel()
	e := NewEndpoints([]*Client{{display: "a"}, {display: "b"}, {display: "c"}}, EndpointsConfig{ChainID: 1}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, ep := range e.eps {
		ep.verified = true
	}
	var asked []string
	failing := map[string]bool{"a": true}
	f := failover[string]{
		call: func(_ context.Context, ep *endpoint) (string, error) {
			asked = append(asked, ep.c.String())
			if failing[ep.c.String()] {
				return "", fmt.Errorf("%s is down", ep.c.String())
			}
			return ep.c.String(), nil
		},
		take: func(_ *endpoint, v string) bool { return v == "c" },
	}
	if err := f.run(context.Background(), e); err != nil || fmt.Sprint(asked) != "[a b c]" {
		t.Fatalf("run = %v, asked %v; want nil, [a b c]", err, asked)
	}
	// a cools down now: b and c are ready and asked first, a last.
	asked, failing = nil, map[string]bool{"a": true, "b": true, "c": true}
	err := f.run(context.Background(), e)
	if err == nil || err.Error() != "a is down" || fmt.Sprint(asked) != "[b c a]" {
		t.Fatalf("run = %v, asked %v; want a's error, [b c a]", err, asked)
	}
}

// TestLookSpan: a look asks a finality window's blocks in one range even
// while the density is still the first probe's, never past the endpoint's
// limit, and no more than the density once many logs set it.
func TestLookSpan(t *testing.T) {
	t.Parallel()
	s := newRangeSizer(EndpointsConfig{MaxRange: 2000, GrowTo: 100_000, TargetLogs: 2000})
	l := s.newLimit()
	if got := s.lookSpan(&l); got != lookFloor {
		t.Fatalf("look span %d at the first probe's density, want %d", got, lookFloor)
	}
	capped := rangeLimit{limit: 10}
	if got := s.lookSpan(&capped); got != 10 {
		t.Fatalf("look span %d under a provider's 10-block limit, want 10", got)
	}
	s.learn(16, 16, 4000) // dense: 8 blocks hold 2000 logs
	if got := s.lookSpan(&l); got != 8 {
		t.Fatalf("look span %d on a dense chain, want the density, 8", got)
	}
	s.learn(8, 8, 0) // sparse again: the density grows
	if got := s.lookSpan(&l); got != lookFloor {
		t.Fatalf("look span %d once sparse again, want %d", got, lookFloor)
	}
}
