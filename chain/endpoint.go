package chain

import (
	"errors"
	"time"
)

// endpoint is one node endpoint of a set: its client, whether it serves
// the configured chain, its learned eth_getLogs limit and its health.
type endpoint struct {
	c        *Client
	verified bool
	wrong    bool // serves another chain: never used
	size     rangeLimit
	health   endpointHealth
}

// endpointHealth is what the calls made so far taught about an endpoint.
// Plain state: Endpoints holds its lock around every use.
type endpointHealth struct {
	downUntil time.Time
	lastClass Class // of the last failed call, "" after a success
	stuck     bool  // refused a one-block range
	// prunedBelow is one past the last block of a range the endpoint
	// refused as pruned history: it is not asked for ranges starting below
	// it. 0: none refused.
	prunedBelow uint64
}

func newEndpointHealth() endpointHealth { return endpointHealth{} }

// succeeded clears what a failure taught: the endpoint is usable again.
func (h *endpointHealth) succeeded() {
	h.lastClass, h.stuck, h.downUntil = "", false, time.Time{}
}

// served records that the endpoint proved a target: a failure other than a
// range refusal, which a target says nothing about, is forgotten.
func (h *endpointHealth) served() {
	if h.lastClass != ClassRangeLimit {
		h.lastClass = ""
	}
}

// failed records a failed call of class: the endpoint cools down until
// until.
func (h *endpointHealth) failed(class Class, until time.Time) {
	h.lastClass, h.downUntil = class, until
}

// cooling reports whether the endpoint rests after a failure at now.
func (h *endpointHealth) cooling(now time.Time) bool { return now.Before(h.downUntil) }

// pruned records a refusal of a range ending at block to as pruned
// history; the endpoint stays usable for newer blocks.
func (h *endpointHealth) pruned(to uint64) { h.prunedBelow = max(h.prunedBelow, to+1) }

// prunedFor reports whether the endpoint refused block from as pruned.
func (h *endpointHealth) prunedFor(from uint64) bool {
	return from < h.prunedBelow
}

// unusable is the readiness state of an endpoint that cannot serve as it
// stands, or nil.
func (h *endpointHealth) unusable() error {
	switch {
	case h.stuck:
		return errors.New("eth_getLogs refused for a single block")
	case h.lastClass == ClassPermanent:
		return errors.New("permanent error")
	}
	return nil
}

// coolDown is how long an endpoint rests after a call failed with err of
// class: throttling as long as the provider asks (at least 5 s), a
// permanent refusal or a one-block range refusal a minute, a bad reply
// 10 s, anything else (unreachable, a timeout, a server error) 5 s.
func coolDown(class Class, err error) time.Duration {
	switch class {
	case ClassThrottled:
		return max(RetryAfterOf(err), 5*time.Second)
	case ClassPermanent:
		return time.Minute
	case ClassRangeLimit:
		if errors.Is(err, ErrResponseTooLarge) && !errors.Is(err, ErrRangeAtOneBlock) {
			// A reply over the cap outside a log range: over WebSocket,
			// a call that shared the connection another call's oversized
			// reply closed.
			return 5 * time.Second
		}
		return time.Minute // a one-block refusal
	case ClassBadReply:
		return 10 * time.Second
	case ClassTransient, ClassPruned:
	}
	return 5 * time.Second
}
