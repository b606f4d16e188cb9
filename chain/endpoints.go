package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
)

var (
	// ErrWrongChain means an endpoint serves another chain than configured.
	ErrWrongChain = errors.New("node serves another chain")
	// ErrFinalityUnsupported means the node cannot name blocks by the
	// configured finality tag.
	ErrFinalityUnsupported = errors.New("finality tag not supported by the node")
	// ErrRangeAtOneBlock means a provider refuses eth_getLogs even for a
	// single block: the poller cannot advance past it through this endpoint.
	ErrRangeAtOneBlock = errors.New("eth_getLogs refused even for a single block")
	// ErrNoEndpoint means no endpoint has answered with the right chain id yet.
	ErrNoEndpoint = errors.New("no endpoint verified yet")
	// ErrHistoryUnavailable means no endpoint serves a block range any more
	// (each one that was asked said its history is pruned): an archive
	// endpoint is needed.
	ErrHistoryUnavailable = errors.New("no endpoint serves this history; an archive endpoint is needed")
)

// EndpointsObserver receives what the endpoint set sees, beyond single calls.
type EndpointsObserver interface {
	Observer
	// Lagging reports an endpoint whose target is behind the highest seen.
	Lagging(endpoint string, behind int64)
	// RangeLimit reports an endpoint's learned eth_getLogs block limit.
	RangeLimit(endpoint string, blocks uint64)
	// Active reports the endpoint now in use.
	Active(endpoint string)
}

// EndpointsConfig describes the chain the endpoints must serve.
type EndpointsConfig struct {
	ChainID       uint64
	Finality      Finality
	Confirmations uint64
	// MaxRange is the eth_getLogs range asked at first (MAX_BLOCK_RANGE).
	MaxRange uint64
	// GrowTo is the largest range ever asked: ranges grow beyond MaxRange
	// up to it while replies are small (under half of TargetLogs) and fast
	// (under FastReply), until a provider refuses one. Zero means MaxRange:
	// no growth beyond it.
	GrowTo uint64
	// FastReply is how long a range's reply may take and still let the
	// range grow; zero means one second.
	FastReply time.Duration
	// GrowAfter is the number of successes after which a limit learned
	// below MaxRange grows by a quarter, and ten times as many after which
	// a provider cap learned above it is tried again a quarter higher; zero
	// means 10.
	GrowAfter int
	// TargetLogs is how many logs a range should carry at most; ranges
	// shrink where logs are dense and grow back where they are sparse, which
	// bounds the memory one range takes. Zero means 2000.
	TargetLogs int
	// Now is the clock of cool-downs and cached readiness; nil means
	// time.Now (tests set their own).
	Now func() time.Time
	// Quorum is how many distinct endpoints must give the same target and
	// the same burns for a range before it is returned (RPC_QUORUM); 0 or 1
	// trusts the serving endpoint alone.
	Quorum int
}

// Endpoints is the set of node endpoints of one chain (RPC_URL may list
// several). One serves at a time; an endpoint that fails or lags hands over
// to the next. The set remembers the highest target any endpoint reported,
// so the target never moves backwards, and learns each endpoint's
// eth_getLogs range limit. Target and BurnRange are meant to be called by
// one loop; they are safe for concurrent use.
type Endpoints struct {
	cfg EndpointsConfig
	obs EndpointsObserver
	log *slog.Logger

	mu       sync.Mutex
	eps      []*endpoint
	cur      int
	highest  int64
	health   error // last readiness answer, reused for healthTTL
	healthAt time.Time
	// density is the range size that keeps a range near TargetLogs logs,
	// learned from the chain (the same whichever endpoint serves).
	density        uint64
	densityLearned bool
	// gap is the first block no endpoint serves (each asked said pruned),
	// or -1; it clears once a range from there is read.
	gap int64
	// quorumWait is set while fewer endpoints answer than the quorum
	// needs; quorumSplit while they disagree on a range. Readiness says so.
	quorumWait, quorumSplit error
}

type endpoint struct {
	c        *Client
	verified bool
	wrong    bool // serves another chain: never used
	// limit is the largest range asked of this endpoint now; cap, once a
	// refusal or a timeout taught it (0 before), the most it grows to.
	limit, cap uint64
	okStreak   int
	downUntil  time.Time
	lastClass  Class // of the last failed call, "" after a success
	stuck      bool  // refused a one-block range
	// prunedTo is the last block of a range the endpoint refused as pruned
	// history: it is not asked for ranges starting at or below it. -1: none.
	prunedTo int64
}

// Target is the finality target as the serving endpoint proves it.
type Target struct {
	// Block is the highest block the serving endpoint can prove under the
	// configured finality, or -1. The poller never processes beyond it.
	Block int64
	// Highest is the highest target any endpoint has reported; it never
	// decreases.
	Highest int64
}

// NewEndpoints returns the set for clients, in order of preference.
func NewEndpoints(clients []*Client, cfg EndpointsConfig, obs EndpointsObserver, log *slog.Logger) *Endpoints {
	if cfg.GrowAfter <= 0 {
		cfg.GrowAfter = 10
	}
	if cfg.MaxRange == 0 {
		cfg.MaxRange = 1000
	}
	cfg.GrowTo = max(cfg.GrowTo, cfg.MaxRange)
	if cfg.FastReply <= 0 {
		cfg.FastReply = time.Second
	}
	if obs == nil {
		obs = nopObserver{}
	}
	if cfg.TargetLogs <= 0 {
		cfg.TargetLogs = 2000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Density is unknown at first: start small, and double while sparse.
	e := &Endpoints{cfg: cfg, obs: obs, log: log, highest: -1, density: min(cfg.MaxRange, 16), gap: -1}
	for _, c := range clients {
		e.eps = append(e.eps, &endpoint{c: c, limit: cfg.MaxRange, prunedTo: -1})
	}
	return e
}

// Close closes every client.
func (e *Endpoints) Close() {
	for _, ep := range e.eps {
		ep.c.Close()
	}
}

// String names the endpoints, redacted.
func (e *Endpoints) String() string {
	s := ""
	for i, ep := range e.eps {
		if i > 0 {
			s += ","
		}
		s += ep.c.String()
	}
	return s
}

// Verify checks every endpoint's chain id. An endpoint on another chain is a
// configuration error: Verify returns an error wrapping ErrWrongChain. It
// returns an error wrapping ErrNoEndpoint, worth retrying, while no endpoint
// answers; endpoints that do not answer yet are checked before first use.
func (e *Endpoints) Verify(ctx context.Context) error {
	var errs []error
	verified := 0
	for _, ep := range e.eps {
		err := e.verify(ctx, ep)
		switch {
		case errors.Is(err, ErrWrongChain):
			return err
		case err != nil:
			errs = append(errs, err)
		default:
			verified++
		}
	}
	if verified == 0 {
		return fmt.Errorf("%w: %w", ErrNoEndpoint, errors.Join(errs...))
	}
	for _, err := range errs {
		e.log.Warn("endpoint not reachable yet; it will be checked before use", slog.Any("err", err))
	}
	return nil
}

func (e *Endpoints) verify(ctx context.Context, ep *endpoint) error {
	e.mu.Lock()
	done, wrong := ep.verified, ep.wrong
	e.mu.Unlock()
	if wrong {
		return fmt.Errorf("%w: %s", ErrWrongChain, ep.c)
	}
	if done {
		return nil
	}
	id, err := ep.c.ChainID(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if id != e.cfg.ChainID {
		ep.wrong = true
		return fmt.Errorf("%w: CHAIN_ID is %d but the node at %s reports chain id %d", ErrWrongChain, e.cfg.ChainID, ep.c, id)
	}
	ep.verified = true
	return nil
}

// ProbeFinality checks that the serving endpoint supports the configured
// finality tag. It returns an error wrapping ErrFinalityUnsupported, with
// the setting to use instead, when the node rejects the tag or has a long
// chain but no such block; a node that has no finalized block yet on a young
// chain is fine.
func (e *Endpoints) ProbeFinality(ctx context.Context) error {
	tag := string(e.cfg.Finality)
	if e.cfg.Finality == FinalityLatest {
		return nil
	}
	ep, _, err := e.pick(ctx, nil)
	if err != nil {
		return err
	}
	advice := fmt.Sprintf("use FINALITY=latest with CONFIRMATIONS set to the chain's reorganisation depth, or an endpoint that supports %q", tag)
	_, err = ep.c.HeaderByTag(ctx, tag)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoFinalityBlock):
		head, herr := ep.c.BlockNumber(ctx)
		if herr != nil {
			return herr
		}
		// A chain with a finality gadget finalizes within a few epochs; a
		// long chain that never did has none.
		if head > 256 {
			return fmt.Errorf("%w: FINALITY=%s, but the node at %s has %d blocks and no %s block; %s",
				ErrFinalityUnsupported, tag, ep.c, head, tag, advice)
		}
		return nil
	case ClassOf(err) == ClassPermanent && !errors.As(err, new(rpc.HTTPError)):
		// A JSON-RPC refusal of the request, not of our credentials.
		return fmt.Errorf("%w: FINALITY=%s, but the node at %s rejects the %q block tag (%v); %s",
			ErrFinalityUnsupported, tag, ep.c, tag, err, advice)
	}
	return err
}

// Target asks the serving endpoint for the finality target. An endpoint
// behind the highest target seen is lagging: another endpoint takes over if
// one is ahead; if none is, Target returns what the best of them can prove.
func (e *Endpoints) Target(ctx context.Context) (Target, error) {
	if e.cfg.Quorum > 1 {
		return e.quorumTarget(ctx)
	}
	var (
		tried   []*endpoint
		lastErr error
		best    *endpoint
		bestT   int64 = -2
	)
	for range e.eps {
		ep, ready, err := e.pick(ctx, tried)
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		// An endpoint cooling down after a failure is asked only when no
		// ready one answered: a slightly lagging healthy endpoint beats it.
		if !ready && best != nil {
			break
		}
		tried = append(tried, ep)
		t, err := ep.c.Target(ctx, e.cfg.Finality, e.cfg.Confirmations)
		if err != nil {
			if ctx.Err() != nil {
				return Target{}, err // the caller gave up: no endpoint's fault
			}
			e.fail(ctx, ep, err)
			lastErr = err
			continue
		}
		e.mu.Lock()
		highest := e.highest
		e.mu.Unlock()
		if t >= highest {
			return e.serve(ep, t), nil
		}
		e.obs.Lagging(ep.c.String(), highest-t)
		e.log.Warn("endpoint is behind the highest target seen", slog.String("endpoint", ep.c.String()),
			slog.Int64("target", t), slog.Int64("highest", highest))
		if t > bestT {
			best, bestT = ep, t
		}
	}
	if best != nil {
		return e.serve(best, bestT), nil
	}
	return Target{}, lastErr
}

// serve makes ep the serving endpoint with target t.
func (e *Endpoints) serve(ep *endpoint, t int64) Target {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.highest = max(e.highest, t)
	if ep.lastClass != ClassRangeLimit {
		ep.lastClass = ""
	}
	e.activate(ep)
	return Target{Block: t, Highest: e.highest}
}

// activate makes ep the serving endpoint; e.mu is held.
func (e *Endpoints) activate(ep *endpoint) {
	for i, x := range e.eps {
		if x == ep && i != e.cur {
			e.cur = i
			e.log.Warn("switched endpoint", slog.String("endpoint", ep.c.String()))
			e.obs.Active(ep.c.String())
		}
	}
}

// BurnRange fetches the burns of contracts from block from up to at most
// maxTo from a usable endpoint, chosen as Target chooses: the serving one
// unless it is cooling down after a failure, else the next; never one on
// another chain, and each one's chain id checked before its first use. The
// returned Range may end before maxTo: it stays within that endpoint's
// learned range limit. A "range too large" reply shrinks the range to the
// provider's suggestion when smaller, else halves it, and tries again at
// once; the limit learned grows back slowly after successes. A refusal at a
// single block gives ErrRangeAtOneBlock. An endpoint that says it no longer
// serves the blocks (pruned history) is passed over for them and the next is
// asked at once; when none serves them, the error wraps
// ErrHistoryUnavailable. Any other failure is returned and hands over: the
// next call goes to the next endpoint. The range is not asked elsewhere
// within the call: the caller retries it, after asking for a target again,
// which the endpoint taking over then proves. With a quorum, k endpoints
// must give the same range (see quorumRange).
func (e *Endpoints) BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (Range, error) {
	if from > maxTo {
		return Range{}, fmt.Errorf("empty range [%d, %d]", from, maxTo)
	}
	if e.cfg.Quorum > 1 && !creditsNothing(ctx) {
		return e.quorumRange(ctx, contracts, from, maxTo)
	}
	var (
		tried  []*endpoint
		pruned error = ErrHistoryPruned
	)
	for {
		ep, _, err := e.pick(ctx, append(tried, e.prunedFor(from)...))
		if err != nil {
			if e.anyPrunedFor(from) {
				return Range{}, e.historyGap(from, pruned)
			}
			return Range{}, err
		}
		r, err := e.burnRange(ctx, ep, contracts, from, maxTo)
		if ClassOf(err) == ClassPruned {
			tried, pruned = append(tried, ep), err
			continue
		}
		if err != nil {
			return Range{}, err
		}
		e.mu.Lock()
		e.activate(ep)
		e.gap = -1
		e.mu.Unlock()
		return r, nil
	}
}

// prunedFor returns the endpoints that refused block from as pruned history.
func (e *Endpoints) prunedFor(from uint64) []*endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*endpoint
	for _, ep := range e.eps {
		if ep.prunedTo >= 0 && uint64(ep.prunedTo) >= from {
			out = append(out, ep)
		}
	}
	return out
}

func (e *Endpoints) anyPrunedFor(from uint64) bool { return len(e.prunedFor(from)) > 0 }

// historyGap is the error when no endpoint serves block from; it is logged
// once per block and readiness reports it.
func (e *Endpoints) historyGap(from uint64, last error) error {
	e.mu.Lock()
	first := e.gap != int64(from)
	e.gap = int64(from)
	e.mu.Unlock()
	err := &Error{Class: ClassPruned, Endpoint: e.String(), Method: "eth_getLogs",
		Err: fmt.Errorf("block %d: %w (every endpoint of RPC_URL that was asked has pruned it; add an archive endpoint to RPC_URL): %w", from, ErrHistoryUnavailable, last)}
	if first {
		e.log.Error("no endpoint serves this block's history any more; the cursor cannot advance until RPC_URL lists an archive endpoint",
			slog.Uint64("block", from), slog.Any("err", last))
	}
	return err
}

func (e *Endpoints) burnRange(ctx context.Context, ep *endpoint, contracts []common.Address, from, maxTo uint64) (Range, error) {
	e.mu.Lock()
	limit := min(ep.limit, e.density)
	e.mu.Unlock()
	to := maxTo
	if to-from+1 > limit {
		to = from + limit - 1
	}
	for {
		start := time.Now()
		r, err := ep.c.BurnRange(ctx, contracts, from, to)
		if err == nil {
			logs := len(r.Burns) + len(r.Rejected)
			e.succeed(ep, to-from+1, logs, time.Since(start))
			e.learnDensity(to-from+1, densitySpan(from, to, firstLog(r), logs), logs)
			return r, nil
		}
		var rpcErr *Error
		if errors.As(err, &rpcErr) && rpcErr.Class == ClassPruned && ctx.Err() == nil {
			// The endpoint is fine for newer blocks: no cool-down.
			e.mu.Lock()
			ep.prunedTo = max(ep.prunedTo, int64(to))
			e.mu.Unlock()
			e.log.Warn("endpoint no longer serves these blocks (pruned history); asking another", slog.String("endpoint", ep.c.String()),
				slog.Uint64("from", from), slog.Uint64("to", to), slog.Any("err", err))
			return Range{}, err
		}
		if !errors.As(err, &rpcErr) || rpcErr.Class != ClassRangeLimit {
			e.tooSlow(ctx, ep, to-from+1, err)
			e.fail(ctx, ep, err)
			return Range{}, err
		}
		span := to - from + 1
		if errors.Is(err, ErrResponseTooLarge) && span > 1 {
			// Too many logs to read safely: a density problem, not the
			// provider's limit. The cut reply shows how dense the blocks
			// are, so the next range is the right size at once.
			var cut cutReply
			if rpcErr.cut != nil {
				cut = *rpcErr.cut
			}
			next := sizeAfterTooLarge(span, from, cut, e.cfg.TargetLogs)
			e.mu.Lock()
			e.density = next
			e.mu.Unlock()
			e.log.Warn("reply too large; narrowing the range", slog.Uint64("from", from), slog.Uint64("to", to), slog.Uint64("blocks", next))
			to = from + next - 1
			continue
		}
		if span == 1 {
			err = fmt.Errorf("block %d on %s: %w: %w", from, ep.c, ErrRangeAtOneBlock, err)
			e.fail(ctx, ep, err) // another endpoint, if any, takes over
			e.mu.Lock()
			ep.stuck = true
			e.mu.Unlock()
			return Range{}, err
		}
		next := shrink(span, from, to, rpcErr.Limit)
		e.mu.Lock()
		ep.limit, ep.okStreak = next, 0
		if span > e.cfg.MaxRange {
			// Refused above MAX_BLOCK_RANGE: the provider's cap, kept.
			ep.cap = next
		}
		e.mu.Unlock()
		e.obs.RangeLimit(ep.c.String(), next)
		e.log.Warn("provider refused the eth_getLogs range; narrowing it", slog.String("endpoint", ep.c.String()),
			slog.Uint64("from", from), slog.Uint64("to", to), slog.Uint64("new_limit", next), slog.Any("err", err))
		to = from + next - 1
	}
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

// learnDensity sizes the next ranges from this one's log count: down in
// proportion where logs are dense, up where they are sparse (see growth).
// The density is that of the blocks from the range's first log on (see
// densitySpan): where the logs begin inside the range, the next range is
// sized by them, even when the range as a whole held no more than the
// target.
func (e *Endpoints) learnDensity(span, logSpan uint64, logs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.densityLearned = true
	target := uint64(e.cfg.TargetLogs)
	switch {
	case uint64(logs) > target:
		e.density = max(1, logSpan*target/uint64(logs))
	case uint64(logs) < target/2 && span >= e.density:
		e.density = min(e.cfg.GrowTo, e.density*e.growth(logs))
	case uint64(logs) >= target/2 && logSpan < span:
		// Near the target, but all of it from the first log on: at the
		// same size the next range, dense throughout, would hold more.
		e.density = max(1, min(e.density, logSpan*target/uint64(logs)))
	}
}

// growth is the factor a range grows by after a reply of logs logs, under
// half of TargetLogs: as many times as the reply is below half the target,
// from 2 to 8. An empty stretch reaches a provider's 10,000-block cap in
// four replies from 16 blocks, where doubling would take ten; a reply near
// the target grows by 2 only.
func (e *Endpoints) growth(logs int) uint64 {
	return min(8, max(2, uint64(e.cfg.TargetLogs)/uint64(2*(logs+1))))
}

// Span is the size of the next eth_getLogs range: the serving endpoint's
// limit within the chain's log density.
func (e *Endpoints) Span() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return min(e.eps[e.cur].limit, e.density)
}

// HintDensity seeds the range size from logs counted over blocks elsewhere
// (the ledger), before any range has taught it: a replica taking over on a
// dense chain then does not start with a range too large to read. No logs
// is no hint: the ledger may simply not hold those blocks yet (a first
// sync from START_BLOCK), so the first range stays a small probe and grows
// with the replies, rather than asking a dense chain for MaxRange blocks
// in one reply that would only be thrown away.
func (e *Endpoints) HintDensity(blocks uint64, logs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.densityLearned || blocks == 0 || logs <= 0 {
		return
	}
	e.density = hintedDensity(blocks, logs, e.cfg.TargetLogs, e.cfg.MaxRange)
}

// succeed records a range of span blocks with logs logs that took took.
// Below MaxRange (after a refusal) the limit grows back by a quarter every
// GrowAfter successes. At or above it, a small and fast reply to a range as
// large as the limit and the density allowed grows the limit past that
// range (see growth), up to the cap a provider taught or GrowTo; a cap is tried again
// a quarter higher after GrowAfter × 10 successes, so that a refusal that
// was about a dense stretch rather than the provider's rule does not bind
// for ever, at the cost of one refused call in a hundred where it was the
// rule.
func (e *Endpoints) succeed(ep *endpoint, span uint64, logs int, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.lastClass, ep.stuck, ep.downUntil = "", false, time.Time{}
	ep.okStreak++
	ceiling := e.cfg.GrowTo
	if ep.cap > 0 {
		ceiling = ep.cap
	}
	grown := ep.limit
	switch {
	case ep.limit < e.cfg.MaxRange:
		if ep.okStreak >= e.cfg.GrowAfter {
			grown = min(e.cfg.MaxRange, ceiling, ep.limit+max(1, ep.limit/4))
		}
	case span >= min(ep.limit, e.density) && uint64(logs) < uint64(e.cfg.TargetLogs)/2 && took < e.cfg.FastReply:
		// A range as large as asked for was small and fast: the next may
		// be larger, whichever of the limit and the density held it.
		grown = min(ceiling, max(ep.limit, span*e.growth(logs)))
	}
	if ep.cap > 0 && ep.limit >= ep.cap && ep.okStreak >= 10*e.cfg.GrowAfter {
		ep.cap = min(e.cfg.GrowTo, ep.cap+max(1, ep.cap/4))
		grown = ep.cap
	}
	if grown != ep.limit {
		ep.limit, ep.okStreak = grown, 0
		e.obs.RangeLimit(ep.c.String(), ep.limit)
	}
}

// tooSlow shrinks the limit of an endpoint that did not answer a range
// above MaxRange in time (a timeout): that size is more than the node
// reads within RPC_TIMEOUT, and asking it again would time out again. The
// halved size is kept as the endpoint's cap.
func (e *Endpoints) tooSlow(ctx context.Context, ep *endpoint, span uint64, err error) {
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if span <= e.cfg.MaxRange {
		return
	}
	ep.limit = max(e.cfg.MaxRange, span/2)
	ep.cap, ep.okStreak = ep.limit, 0
	e.density = min(e.density, ep.limit)
	e.obs.RangeLimit(ep.c.String(), ep.limit)
	e.log.Warn("eth_getLogs timed out on a range above MAX_BLOCK_RANGE; narrowing it", slog.String("endpoint", ep.c.String()),
		slog.Uint64("blocks", span), slog.Uint64("new_limit", ep.limit))
}

// fail records a failed call and hands over to the next endpoint. A call
// whose ctx ended failed because the caller gave up, not because of the
// node: it is not recorded.
func (e *Endpoints) fail(ctx context.Context, ep *endpoint, err error) {
	if ctx.Err() != nil {
		return
	}
	class := ClassOf(err)
	cool := 5 * time.Second
	switch class {
	case ClassThrottled:
		cool = max(RetryAfterOf(err), 5*time.Second)
	case ClassPermanent:
		cool = time.Minute
	case ClassRangeLimit:
		cool = time.Minute // a one-block refusal
		if errors.Is(err, ErrResponseTooLarge) && !errors.Is(err, ErrRangeAtOneBlock) {
			// A reply over the cap outside a log range: over WebSocket,
			// a call that shared the connection another call's oversized
			// reply closed.
			cool = 5 * time.Second
		}
	case ClassBadReply:
		cool = 10 * time.Second
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.lastClass, ep.okStreak = class, 0
	ep.downUntil = e.cfg.Now().Add(cool)
	if len(e.eps) > 1 && e.eps[e.cur] == ep {
		e.log.Warn("endpoint failed; handing over", slog.String("endpoint", ep.c.String()),
			slog.String("class", string(class)), slog.Duration("cooldown", cool))
	}
}

// pick returns the endpoint to use: the serving one unless it is cooling
// down, else the next usable one in order; endpoints in skip are passed
// over. An unverified endpoint is verified first.
func (e *Endpoints) pick(ctx context.Context, skip []*endpoint) (ep *endpoint, ready bool, err error) {
	e.mu.Lock()
	n := len(e.eps)
	now := e.cfg.Now()
	var readyEps, cooling []*endpoint
	for i := range n {
		ep := e.eps[(e.cur+i)%n]
		switch {
		case ep.wrong || slices.Contains(skip, ep):
		case now.Before(ep.downUntil):
			cooling = append(cooling, ep)
		default:
			readyEps = append(readyEps, ep)
		}
	}
	e.mu.Unlock()
	// Ready endpoints first; the rest still beat none.
	var lastErr error = ErrNoEndpoint
	for i, ep := range append(readyEps, cooling...) {
		if err := e.verify(ctx, ep); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil, false, err // the caller gave up
			case errors.Is(err, ErrWrongChain):
				e.log.Error("endpoint serves another chain; not using it", slog.Any("err", err))
			default:
				e.fail(ctx, ep, err)
			}
			lastErr = err
			continue
		}
		return ep, i < len(readyEps), nil
	}
	return nil, false, lastErr
}

// Header returns the canonical header of block n from a usable endpoint,
// chosen as Target chooses; when one fails, the next is asked.
func (e *Endpoints) Header(ctx context.Context, n uint64) (Header, error) {
	hs, err := e.Headers(ctx, []uint64{n})
	if err != nil {
		return Header{}, err
	}
	return hs[n], nil
}

// Headers returns the canonical headers of blocks ns from a usable
// endpoint, asked in batches, failing over to the next endpoint within the
// call. A block the node does not have fails the call (ErrNotFound).
func (e *Endpoints) Headers(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	if e.cfg.Quorum > 1 {
		return e.quorumHeaders(ctx, ns)
	}
	var (
		tried   []*endpoint
		lastErr error
	)
	for range e.eps {
		ep, _, err := e.pick(ctx, tried)
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		tried = append(tried, ep)
		hs, err := ep.c.HeadersByNumber(ctx, ns)
		if err == nil {
			return hs, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		e.fail(ctx, ep, err)
		lastErr = err
	}
	return nil, lastErr
}

// Head returns the header of the serving endpoint's head (latest), failing
// over like Headers.
func (e *Endpoints) Head(ctx context.Context) (Header, error) {
	var (
		tried   []*endpoint
		lastErr error
	)
	for range e.eps {
		ep, _, err := e.pick(ctx, tried)
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		tried = append(tried, ep)
		h, err := ep.c.HeaderByTag(ctx, "latest")
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return Header{}, err
		}
		e.fail(ctx, ep, err)
		lastErr = err
	}
	return Header{}, lastErr
}

// healthTTL is how long a readiness answer is reused, so that frequent
// probes do not spend the provider's quota.
const healthTTL = 5 * time.Second

// Health reports, for readiness, whether the serving endpoint answers with
// the right chain id and is usable; the error text is a short state.
func (e *Endpoints) Health(ctx context.Context) error {
	e.mu.Lock()
	ep := e.eps[e.cur]
	class, stuck := ep.lastClass, ep.stuck
	cached, at := e.health, e.healthAt
	gap, quorumWait, quorumSplit := e.gap, e.quorumWait, e.quorumSplit
	e.mu.Unlock()
	switch {
	case gap >= 0:
		return fmt.Errorf("history not served: block %d needs an archive endpoint", gap)
	case quorumWait != nil:
		return quorumWait
	case quorumSplit != nil:
		return quorumSplit
	case stuck:
		return errors.New("eth_getLogs refused for a single block")
	case class == ClassPermanent:
		return errors.New("permanent error")
	}
	if e.cfg.Now().Sub(at) < healthTTL {
		return cached
	}
	id, err := ep.c.ChainID(ctx)
	if err != nil && ctx.Err() != nil {
		return err // the probe gave up: nothing learnt about the node
	}
	var state error
	switch {
	case err != nil && ClassOf(err) == ClassPermanent:
		state = errors.New("permanent error")
	case err != nil:
		state = errors.New("unreachable")
	case id != e.cfg.ChainID:
		state = errors.New("wrong chain id")
	}
	e.mu.Lock()
	e.health, e.healthAt = state, e.cfg.Now()
	e.mu.Unlock()
	return state
}
