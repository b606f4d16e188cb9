package poller

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// defaultMaxBackoff caps the wait after errors unless configured.
const defaultMaxBackoff = 30 * time.Second

// newBackoff is the back-off after failed transactions: 250 ms doubling, with
// jitter, up to maxWait.
func newBackoff(maxWait time.Duration) *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = min(250*time.Millisecond, maxWait)
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.MaxInterval = maxWait
	return b
}

// retryWait is the pause after a failed transaction: the back-off, at least
// the provider's Retry-After, and the longest back-off for failures that
// waiting will not fix soon.
func retryWait(b *backoff.ExponentialBackOff, err error, maxWait time.Duration) time.Duration {
	wait := b.NextBackOff()
	switch chain.ClassOf(err) {
	case chain.ClassThrottled:
		wait = max(wait, chain.RetryAfterOf(err))
	case chain.ClassPermanent:
		wait = maxWait
	default:
		// The back-off as it stands.
	}
	if errors.Is(err, chain.ErrRangeAtOneBlock) || errors.Is(err, payments.ErrHookMismatch) ||
		errors.Is(err, payments.ErrContractsMismatch) || errors.Is(err, chain.ErrHistoryUnavailable) {
		wait = maxWait
	}
	return min(wait, max(maxWait, chain.RetryAfterOf(err)))
}

// sleep waits for d or until ctx is done, beating beat meanwhile: a long wait
// ordered by a provider is not a stall.
func sleep(ctx context.Context, d time.Duration, beat *Heartbeat) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		t := time.NewTimer(min(left, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			beat.Beat()
		}
	}
}
