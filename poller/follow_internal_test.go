package poller

import (
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
)

func TestHeadDue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		blockTime time.Duration
		headAge   time.Duration
		woken     bool
		want      bool
	}{
		{"block time not known yet: the header", 0, time.Second, false, true},
		{"a new head woke the poll", 12 * time.Second, time.Second, true, true},
		{"12 s blocks, 10 s after the last move: the number", 12 * time.Second, 10 * time.Second, false, false},
		{"12 s blocks, 11 s after: the header", 12 * time.Second, 11 * time.Second, false, true},
		{"2 s blocks polled every 2 s: every poll", 2 * time.Second, 1990 * time.Millisecond, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			l := &Loop{cfg: LoopConfig{PollInterval: 2 * time.Second}, blockTime: tt.blockTime, headAt: now.Add(-tt.headAge)}
			if tt.woken {
				l.woken = now
			}
			if got := l.headDue(); got != tt.want {
				t.Fatalf("headDue = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestHeadMovedLearnsTheBlockTime: the heads' timestamps tell the block
// time; a head that did not move changes nothing.
func TestHeadMovedLearnsTheBlockTime(t *testing.T) {
	t.Parallel()
	l := &Loop{}
	l.headMoved(chain.Header{Number: 8, Time: 1000})
	seen := l.headAt
	if l.blockTime != 0 || seen.IsZero() {
		t.Fatalf("after a first head: block time %s, seen at %v", l.blockTime, seen)
	}
	l.headMoved(chain.Header{Number: 8, Time: 1000})
	if !l.headAt.Equal(seen) {
		t.Fatal("a head that did not move moved the time it was seen")
	}
	l.headMoved(chain.Header{Number: 10, Time: 1024})
	if l.blockTime != 12*time.Second || !l.headAt.After(seen) {
		t.Fatalf("block time %s after 8 at 1000 and 10 at 1024, want 12s", l.blockTime)
	}
}

// TestHeadStill: a head reads as standing still once this replica's polls
// have read it at one number for the block time plus a poll interval, the block time at most
// MaxBlockTime whatever the heads' timestamps say (a chain that seals only
// on transactions: blocks hours apart), and MaxBlockTime while not known.
func TestHeadStill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		blockTime time.Duration
		headAge   time.Duration
		want      bool
	}{
		{"12 s blocks, 13 s after the last move: between blocks", 12 * time.Second, 13 * time.Second, false},
		{"12 s blocks, 14 s after: a block late by a poll", 12 * time.Second, 14 * time.Second, true},
		{"2 s blocks, 3 s after", 2 * time.Second, 3 * time.Second, false},
		{"2 s blocks, 4 s after", 2 * time.Second, 4 * time.Second, true},
		{"blocks an hour apart, 31 s after", time.Hour, 31 * time.Second, false},
		{"blocks an hour apart, 32 s after: MaxBlockTime bounds the wait", time.Hour, 32 * time.Second, true},
		{"block time not known yet, 31 s after", 0, 31 * time.Second, false},
		{"block time not known yet, 32 s after", 0, 32 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := &Loop{cfg: LoopConfig{PollInterval: 2 * time.Second, MaxBlockTime: DefaultMaxBlockTime},
				blockTime: tt.blockTime, numberAt: time.Now().Add(-tt.headAge)}
			if got := l.headStill(); got != tt.want {
				t.Fatalf("headStill = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadinessTellsAStalledReplicaFromAnIdleChain: a replica whose polls
// mark the group polled (the others leave it the reads) without knowing
// where the target stands for FailingFor is not ready; one that checks it
// at every poll (an idle chain: the cursor at the head), or one that stood
// aside meanwhile, is.
func TestReadinessTellsAStalledReplicaFromAnIdleChain(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name            string
		polled, checked time.Time
		wantErr         bool
	}{
		{"idle chain: checked at every poll", now, now, false},
		{"between blocks: the last look's target stands", now, now.Add(-14 * time.Second), false},
		{"stood aside since its last read", now.Add(-time.Hour), now.Add(-time.Hour), false},
		{"never polled", time.Time{}, time.Time{}, false},
		{"stalled: polling, the target unread", now, now.Add(-FailingFor - time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l latch
			l.checked(tt.checked)
			l.polled(tt.polled)
			err := l.health()
			if (err != nil) != tt.wantErr {
				t.Fatalf("health() = %v, want an error: %v", err, tt.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "target unread since ") {
				t.Fatalf("health() = %q", err)
			}
		})
	}
}
