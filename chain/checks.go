package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
)

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
	if ctx.Err() != nil {
		// Given up on (start-up ended on another failure, or a stop): an
		// endpoint cut short is no news.
		return nil
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
		// A JSON-RPC refusal of the request, not of our credentials. Its
		// text is told, not wrapped: the error is a configuration error,
		// and must not classify as the node's failure to retry.
		return fmt.Errorf("%w: FINALITY=%s, but the node at %s rejects the %q block tag (%v); %s",
			ErrFinalityUnsupported, tag, ep.c, tag, err, advice) //nolint:errorlint // told, not wrapped: see above
	}
	return err
}

// probes do not spend the provider's quota.
const healthTTL = 5 * time.Second

// healthQuiet is how long the serving endpoint's last answer stands for
// its health: a node that answered a moment ago (and has neither failed
// since nor answered the last probe with another chain id) is reachable,
// on the chain verified at its first use, and is not asked again for
// readiness. A standby, which reads nothing, asks
// once per healthQuiet at most, however often readiness is probed.
const healthQuiet = time.Minute

// Health reports, for readiness, whether the serving endpoint answers with
// the right chain id and is usable; the error text is a short state.
func (e *Endpoints) Health(ctx context.Context) error {
	e.mu.Lock()
	ep := e.eps[e.cur]
	unusable := ep.health.unusable()
	failed := ep.health.lastClass != ""
	cached, at := e.health, e.healthAt
	gap, hasGap, quorumWait, quorumSplit := e.gap, e.hasGap, e.quorumWait, e.quorumSplit
	e.mu.Unlock()
	switch {
	case hasGap:
		return fmt.Errorf("history not served: block %d needs an archive endpoint", gap)
	case quorumWait != nil:
		return quorumWait
	case quorumSplit != nil:
		return quorumSplit
	case unusable != nil:
		return unusable
	case cached == nil && !failed && ep.c.answeredWithin(time.Now(), healthQuiet):
		return nil
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
