package webhooks

import (
	"context"
	"errors"
	"fmt"
)

// enqueueBatch is the most events looked at per endpoint and transaction.
const enqueueBatch = 1000

// enqueueAll creates the delivery rows each endpoint is owed.
func (d *Dispatcher) enqueueAll(ctx context.Context) error {
	for _, e := range d.cfg.Endpoints {
		for {
			more, err := d.enqueue(ctx, e.Label)
			if errors.Is(err, errEndpointGone) {
				err = d.reregister(ctx, e)
			}
			if err != nil {
				return fmt.Errorf("endpoint %s: %w", e.Label, err)
			}
			if !more {
				break
			}
		}
	}
	return nil
}

// errEndpointGone says an endpoint's row is no longer in webhook_endpoints.
var errEndpointGone = errors.New("the endpoint's row was deleted")

// enqueue moves one endpoint's watermark over the next committed events,
// creating a delivery for each subscribed one, in one statement: the
// endpoint's row is locked only while the server runs it, never across a
// round trip, so a replica that freezes holds up no other. Another replica
// doing the same skips the endpoint (SKIP LOCKED). Because seqs are given
// in commit order without gaps, every seq up to the highest visible one is
// committed: the watermark never passes an event still to come.
func (d *Dispatcher) enqueue(ctx context.Context, label string) (more bool, err error) {
	var (
		from, to *int64
		present  bool
	)
	err = d.pool.QueryRow(ctx, `
		WITH ep AS (
			SELECT endpoint, enqueued_seq, events FROM webhook_endpoints WHERE endpoint = $1
			FOR UPDATE SKIP LOCKED
		), span AS (
			SELECT ep.endpoint, ep.enqueued_seq AS from_seq, ep.events,
			       coalesce((SELECT max(seq) FROM payment_events WHERE seq > ep.enqueued_seq AND seq <= ep.enqueued_seq + $2),
			                ep.enqueued_seq) AS to_seq
			FROM ep
		), ins AS (
			INSERT INTO webhook_deliveries (endpoint, seq, event_id)
			SELECT span.endpoint, e.seq, e.event_id
			FROM span JOIN payment_events e ON e.seq > span.from_seq AND e.seq <= span.to_seq AND e.kind = ANY(span.events)
			ON CONFLICT (endpoint, seq) DO NOTHING
		), moved AS (
			UPDATE webhook_endpoints w SET enqueued_seq = span.to_seq, updated_at = now()
			FROM span WHERE w.endpoint = span.endpoint AND span.to_seq > span.from_seq
		)
		SELECT (SELECT from_seq FROM span), (SELECT to_seq FROM span),
		       EXISTS (SELECT 1 FROM webhook_endpoints WHERE endpoint = $1)`, label, enqueueBatch).Scan(&from, &to, &present)
	switch {
	case err != nil:
		return false, err
	case !present:
		return false, errEndpointGone
	case from == nil:
		return false, nil // another replica is at it
	}
	return *to-*from == enqueueBatch, nil
}
