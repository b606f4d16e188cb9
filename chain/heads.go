package chain

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// WatchHeads subscribes to newHeads on the WebSocket endpoint wsURL and,
// for every new head, signals wake without blocking (a wake already pending
// is enough). It resubscribes with back-off whenever the subscription drops
// and reports whether it is up through up; it returns promptly when ctx
// ends, even if the node has stopped answering. Polling goes on regardless:
// the subscription only shortens the wait for news.
func WatchHeads(ctx context.Context, wsURL string, wake chan<- struct{}, up func(bool), log *slog.Logger) {
	display := RedactURL(wsURL)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 500*time.Millisecond, 30*time.Second
	for ctx.Err() == nil {
		err := subscribeHeads(ctx, wsURL, wake, func() { up(true); b.Reset() })
		up(false)
		if ctx.Err() != nil {
			return
		}
		wait := b.NextBackOff()
		log.Warn("newHeads subscription down; polling until it is back", slog.String("endpoint", display),
			slog.Any("err", redactError(err, wsURL, display)), slog.Duration("retry_in", wait))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// headsMessageLimit caps a message of the newHeads connection: a header
// is a few KiB at most.
const headsMessageLimit = 1 << 20

func subscribeHeads(ctx context.Context, wsURL string, wake chan<- struct{}, subscribed func()) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := dialWS(dctx, wsURL, headsMessageLimit, func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	cancel()
	if err != nil {
		return fmt.Errorf("dialing: %w", err)
	}
	// No eth_unsubscribe: a hung peer would keep WatchHeads waiting for its
	// answer past shutdown. Closing the connection ends the subscription.
	defer c.close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	var id string
	err = c.call(sctx, &id, "eth_subscribe", []any{"newHeads"})
	cancel()
	if err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	subscribed()
	select {
	case <-ctx.Done():
		return nil
	case <-c.done:
		return fmt.Errorf("subscription ended: %w", c.lost())
	}
}
