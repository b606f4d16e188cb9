package chain

import "time"

// rangeSizer sizes eth_getLogs ranges. Two things bound a range: each
// endpoint's limit (what its provider accepts and answers in time, learned
// from refusals, timeouts and small fast replies; see rangeLimit) and the
// chain's log density (how many blocks hold about TargetLogs logs, the same
// whichever endpoint serves). It is plain state and arithmetic, with no
// lock and no I/O: Endpoints holds its lock around every call.
type rangeSizer struct {
	maxRange, growTo uint64
	growAfter        int
	fastReply        time.Duration
	targetLogs       uint64
	// density is the range size that keeps a range near targetLogs logs;
	// learned once a range was read.
	density uint64
	learned bool
	// dense says the density was last set by many logs (a reply over
	// targetLogs or over the response cap), not by the first probe or
	// growth.
	dense bool
}

// rangeLimit is one endpoint's learned eth_getLogs limit.
type rangeLimit struct {
	// limit is the largest range asked of the endpoint now; cap, once a
	// refusal or a timeout taught it (0 before), the most it grows to.
	limit, cap uint64
	okStreak   int
}

// newRangeSizer sizes ranges for cfg, whose defaults are already set.
// Density is unknown at first: the first range is a small probe, and
// ranges grow while replies are sparse.
func newRangeSizer(cfg EndpointsConfig) rangeSizer {
	return rangeSizer{
		maxRange: cfg.MaxRange, growTo: cfg.GrowTo, growAfter: cfg.GrowAfter,
		fastReply: cfg.FastReply, targetLogs: uint64(cfg.TargetLogs),
		density: min(cfg.MaxRange, 16),
	}
}

// newLimit is the limit of an endpoint nothing was asked of yet.
func (s *rangeSizer) newLimit() rangeLimit { return rangeLimit{limit: s.maxRange} }

// span is the size of the next range asked of the endpoint with limit l.
func (s *rangeSizer) span(l *rangeLimit) uint64 { return min(l.limit, s.density) }

// lookFloor is the span a look may ask of an endpoint whatever the density
// says, unless many logs set it: a finality window (Ethereum's 64 to 96
// blocks) in one eth_getLogs. A replica that reads one block at a time (a
// target moving a block at a time, without head tracking) never grows the
// density past its first probe.
const lookFloor = 128

// lookSpan is the most blocks a look asks of the endpoint with limit l.
func (s *rangeSizer) lookSpan(l *rangeLimit) uint64 {
	if s.dense {
		return s.span(l)
	}
	return min(l.limit, max(s.density, lookFloor))
}

// read records a range of span blocks that came back with logs logs in
// took, the logs from logSpan blocks before its end on (see densitySpan):
// the endpoint's limit may grow (grow) and the density is learned from it
// (learn). It reports whether the limit changed.
func (s *rangeSizer) read(l *rangeLimit, span, logSpan uint64, logs int, took time.Duration) bool {
	changed := s.grow(l, span, logs, took)
	s.learn(span, logSpan, logs)
	return changed
}

// grow records a success. Below MaxRange (after a refusal) the limit grows
// back by a quarter every GrowAfter successes. At or above it, a small and
// fast reply to a range as large as the limit and the density allowed grows
// the limit past that range (see growth), up to the cap a provider taught or
// GrowTo; a cap is tried again a quarter higher after GrowAfter × 10
// successes, so that a refusal that was about a dense stretch rather than
// the provider's rule does not bind for ever, at the cost of one refused
// call in a hundred where it was the rule.
func (s *rangeSizer) grow(l *rangeLimit, span uint64, logs int, took time.Duration) bool {
	l.okStreak++
	ceiling := s.growTo
	if l.cap > 0 {
		ceiling = l.cap
	}
	grown := l.limit
	switch {
	case l.limit < s.maxRange:
		if l.okStreak >= s.growAfter {
			grown = min(s.maxRange, ceiling, l.limit+max(1, l.limit/4))
		}
	case span >= min(l.limit, s.density) && uint64(logs) < s.targetLogs/2 && took < s.fastReply:
		// A range as large as asked for was small and fast: the next may
		// be larger, whichever of the limit and the density held it.
		grown = min(ceiling, max(l.limit, span*s.growth(logs)))
	}
	if l.cap > 0 && l.limit >= l.cap && l.okStreak >= 10*s.growAfter {
		l.cap = min(s.growTo, l.cap+max(1, l.cap/4))
		grown = l.cap
	}
	if grown == l.limit {
		return false
	}
	l.limit, l.okStreak = grown, 0
	return true
}

// learn sizes the next ranges from this one's log count: down in
// proportion where logs are dense, up where they are sparse (see growth).
// The density is that of the blocks from the range's first log on (see
// densitySpan): where the logs begin inside the range, the next range is
// sized by them, even when the range as a whole held no more than the
// target.
func (s *rangeSizer) learn(span, logSpan uint64, logs int) {
	s.learned = true
	switch n := uint64(logs); {
	case n > s.targetLogs:
		s.density, s.dense = max(1, logSpan*s.targetLogs/n), true
	case n < s.targetLogs/2 && span >= s.density:
		s.density, s.dense = min(s.growTo, s.density*s.growth(logs)), false
	case n >= s.targetLogs/2 && logSpan < span:
		// Near the target, but all of it from the first log on: at the
		// same size the next range, dense throughout, would hold more.
		s.density = max(1, min(s.density, logSpan*s.targetLogs/n))
	}
}

// growth is the factor a range grows by after a reply of logs logs, under
// half of TargetLogs: as many times as the reply is below half the target,
// from 2 to 8. An empty stretch reaches a provider's 10,000-block cap in
// four replies from 16 blocks, where doubling would take ten; a reply near
// the target grows by 2 only.
func (s *rangeSizer) growth(logs int) uint64 {
	return min(8, max(2, s.targetLogs/uint64(2*(logs+1))))
}

// hint seeds the density from logs counted over blocks elsewhere (the
// ledger), before any range has taught it. No logs is no hint: the ledger
// may simply not hold those blocks yet (a first sync from START_BLOCK), so
// the first range stays a small probe.
func (s *rangeSizer) hint(blocks uint64, logs int) {
	if s.learned || blocks == 0 || logs <= 0 {
		return
	}
	s.density = hintedDensity(blocks, logs, int(s.targetLogs), s.maxRange)
}

// refused records a provider's refusal of [from, to] as too large a range
// and returns the next span (see shrink). A refusal above MaxRange is the
// provider's cap and is kept.
func (s *rangeSizer) refused(l *rangeLimit, from, to uint64, rl RangeLimit) uint64 {
	span := to - from + 1
	next := shrink(span, from, to, rl)
	l.limit, l.okStreak = next, 0
	if span > s.maxRange {
		l.cap = next
	}
	return next
}

// tooLarge records a reply to span blocks from from that came back over
// the response cap, cut: a density problem, not the provider's limit. It
// returns the next span (see sizeAfterTooLarge).
func (s *rangeSizer) tooLarge(span, from uint64, cut cutReply) uint64 {
	s.density, s.dense = sizeAfterTooLarge(span, from, cut, int(s.targetLogs)), true
	return s.density
}

// timedOut records a range of span blocks the endpoint did not answer in
// time. Above MaxRange that size is more than the node reads within
// RPC_TIMEOUT, and asking it again would time out again: the limit halves
// (not below MaxRange) and is kept as the endpoint's cap. It reports
// whether the limit changed; at or below MaxRange a timeout teaches nothing
// about size.
func (s *rangeSizer) timedOut(l *rangeLimit, span uint64) bool {
	if span <= s.maxRange {
		return false
	}
	l.limit = max(s.maxRange, span/2)
	l.cap, l.okStreak = l.limit, 0
	s.density = min(s.density, l.limit)
	return true
}

// shrink returns the next range span after a refusal of [from, to]: the
// provider's suggestion or stated limit when smaller, else half. It is
// always at least 1 and less than span, so a range is never asked twice.
func shrink(span, from, to uint64, l RangeLimit) uint64 {
	next := span / 2
	switch {
	case l.Suggested && l.From == from && l.To >= from && l.To < to:
		next = l.To - from + 1
	case l.Suggested && l.To >= l.From && l.To-l.From+1 < span:
		next = l.To - l.From + 1
	case l.MaxBlocks > 0 && l.MaxBlocks < span:
		next = l.MaxBlocks
	}
	return max(1, min(next, span-1))
}

// sizeAfterTooLarge is the next range from block from after a reply to
// span blocks came back over the cap. The cut reply shows where the logs
// begin and how dense the blocks it held whole are: the range runs through
// the empty blocks before the first log and then as many blocks as hold
// target logs at that density, but no more than the blocks that fit under
// the cap. A cap that fell inside the first block with logs leaves only
// the blocks up to it; with nothing seen (a WebSocket reply is not
// scanned), a quarter of span. Always at least 1 and less than span.
func sizeAfterTooLarge(span, from uint64, cut cutReply, target int) uint64 {
	next := span / 4
	switch {
	case cut.seen && cut.first >= from && cut.blocks == 0:
		next = cut.first - from + 1
	case cut.seen && cut.first >= from && cut.logs > 0:
		next = cut.first - from + min(cut.blocks, cut.blocks*uint64(target)/uint64(cut.logs))
	}
	return max(1, min(next, span-1))
}

// densitySpan is the span a range's density is learned over: from its
// first log to its end. Blocks before the first log hold none, and
// counting them would size the next range, where the logs go on, as
// though they were as sparse as the whole range.
func densitySpan(from, to uint64, firstLog uint64, logs int) uint64 {
	if logs == 0 || firstLog < from || firstLog > to {
		return to - from + 1
	}
	return to - firstLog + 1
}

// hintedDensity is the range size that holds about target logs where the
// ledger counted logs over blocks, within [1, maxRange].
func hintedDensity(blocks uint64, logs, target int, maxRange uint64) uint64 {
	return max(1, min(maxRange, blocks*uint64(target)/uint64(logs)))
}

// firstLog is the block of the first log of r, burns and rejected logs
// alike; 0 when it has none.
func firstLog(r Range) uint64 {
	first, found := uint64(0), false
	for _, b := range r.Burns {
		if !found || b.BlockNumber < first {
			first, found = b.BlockNumber, true
		}
	}
	for _, rj := range r.Rejected {
		if !found || rj.Log.BlockNumber < first {
			first, found = rj.Log.BlockNumber, true
		}
	}
	return first
}
