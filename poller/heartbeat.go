package poller

import (
	"sync/atomic"
	"time"
)

// Heartbeat records when a long-running loop last made progress; /livez reads it.
type Heartbeat struct {
	last atomic.Int64
}

// NewHeartbeat returns a heartbeat that beat just now.
func NewHeartbeat() *Heartbeat {
	h := &Heartbeat{}
	h.Beat()
	return h
}

// Beat records progress now. A nil Heartbeat ignores it.
func (h *Heartbeat) Beat() {
	if h != nil {
		h.last.Store(time.Now().UnixNano())
	}
}

// Since returns the time since the last beat.
func (h *Heartbeat) Since() time.Duration { return time.Since(time.Unix(0, h.last.Load())) }
