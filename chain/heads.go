package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ethereum/go-ethereum/rpc"
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

func subscribeHeads(ctx context.Context, wsURL string, wake chan<- struct{}, subscribed func()) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := rpc.DialContext(dctx, wsURL)
	cancel()
	if err != nil {
		return fmt.Errorf("dialing: %w", err)
	}
	defer c.Close()
	heads := make(chan json.RawMessage, 16)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	sub, err := c.EthSubscribe(sctx, heads, "newHeads")
	cancel()
	if err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	// No Unsubscribe: it waits for the node's answer, up to go-ethereum's
	// 10 s, and a hung peer would keep WatchHeads past shutdown. The
	// deferred Close ends the connection, and the subscription with it.
	subscribed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-sub.Err():
			return fmt.Errorf("subscription ended: %w", err)
		case <-heads:
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}
