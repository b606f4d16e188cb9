package chain

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"
)

var (
	// ErrWrongChain means an endpoint serves another chain than configured.
	ErrWrongChain = errors.New("node serves another chain")
	// ErrFinalityUnsupported means the node cannot name blocks by the
	// configured finality tag.
	ErrFinalityUnsupported = errors.New("finality tag not supported by the node")
	// ErrRangeAtOneBlock means even a single block cannot be read: the
	// provider refuses eth_getLogs for it, or its logs, or a receipt the
	// check needs, are over the reply cap (the error wrapped with it says
	// which). The poller cannot advance past it through this endpoint.
	ErrRangeAtOneBlock = errors.New("even a single block cannot be read (eth_getLogs refused, or a reply over the limit)")
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
	// sizer sizes eth_getLogs ranges: each endpoint's limit within the
	// chain's log density (the same whichever endpoint serves).
	sizer rangeSizer
	// gap is the first block no endpoint serves (each asked said pruned)
	// while hasGap; it clears once a range from there is read.
	gap    uint64
	hasGap bool
	// quorumWait is set while fewer endpoints answer than the quorum
	// needs; quorumSplit while they disagree on a range. Readiness says so.
	quorumWait, quorumSplit error
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
	e := &Endpoints{cfg: cfg, obs: obs, log: log, highest: -1, sizer: newRangeSizer(cfg)}
	for _, c := range clients {
		e.eps = append(e.eps, &endpoint{c: c, size: e.sizer.newLimit(), health: newEndpointHealth()})
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

// Span is the size of the next eth_getLogs range: the serving endpoint's
// limit within the chain's log density.
func (e *Endpoints) Span() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sizer.span(&e.eps[e.cur].size)
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
	e.sizer.hint(blocks, logs)
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
		case ep.health.cooling(now):
			cooling = append(cooling, ep)
		default:
			readyEps = append(readyEps, ep)
		}
	}
	e.mu.Unlock()
	// Ready endpoints first; the rest still beat none.
	lastErr := error(ErrNoEndpoint)
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

// healthTTL is how long a readiness answer is reused, so that frequent

// fail records a failed call and hands over to the next endpoint. A call
// whose ctx ended failed because the caller gave up, not because of the
// node: it is not recorded.
func (e *Endpoints) fail(ctx context.Context, ep *endpoint, err error) {
	if ctx.Err() != nil {
		return
	}
	class := ClassOf(err)
	cool := coolDown(class, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.health.failed(class, e.cfg.Now().Add(cool))
	ep.size.okStreak = 0
	if len(e.eps) > 1 && e.eps[e.cur] == ep {
		e.log.Warn("endpoint failed; handing over", slog.String("endpoint", ep.c.String()),
			slog.String("class", string(class)), slog.Duration("cooldown", cool))
	}
}

// succeed records a range of span blocks with logs logs, the first of them
// logSpan blocks before its end, that took took: the endpoint is healthy,
// and its limit and the density learn from the reply.
func (e *Endpoints) succeed(ep *endpoint, span, logSpan uint64, logs int, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.health.succeeded()
	if e.sizer.read(&ep.size, span, logSpan, logs, took) {
		e.obs.RangeLimit(ep.c.String(), ep.size.limit)
	}
}

// tooSlow shrinks the limit of an endpoint that did not answer a range
// above MaxRange in time (a timeout; see rangeSizer.timedOut).
func (e *Endpoints) tooSlow(ctx context.Context, ep *endpoint, span uint64, err error) {
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.sizer.timedOut(&ep.size, span) {
		return
	}
	e.obs.RangeLimit(ep.c.String(), ep.size.limit)
	e.log.Warn("eth_getLogs timed out on a range above MAX_BLOCK_RANGE; narrowing it", slog.String("endpoint", ep.c.String()),
		slog.Uint64("blocks", span), slog.Uint64("new_limit", ep.size.limit))
}
