package poller

import (
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
