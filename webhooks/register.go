package webhooks

import (
	"context"
	"fmt"
	"log/slog"
)

// Register records the configured endpoints and what they receive. An
// endpoint new to the database starts with the events committed after
// now: a deployment adding a webhook is not sent the whole history (poller
// webhooks retry --seq sends an older event). An endpoint whose row was
// deleted (webhook_endpoints_removed, migration 13) starts again from
// where delivery to it stood, so that deleting the row while a replica
// still lists it, in whatever order, loses no event. So does an endpoint
// registered under its label from before token-like host labels were
// hidden, whose row is left as it is (docs/webhooks.md).
func (d *Dispatcher) Register(ctx context.Context) error {
	for _, e := range d.cfg.Endpoints {
		if _, err := d.register(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// register records endpoint e, and returns the seq it resumed from when
// its row had been deleted (-1 otherwise). Not registered yet under its
// label but under its legacy one (before token-like host labels were
// hidden), it starts where delivery under the legacy label stands: the
// first event neither delivered nor dead-lettered there, or, with none,
// the first not queued there yet, as a deleted row resumes (migration
// 13). An event may then reach the endpoint twice, never not at all.
func (d *Dispatcher) register(ctx context.Context, e Endpoint) (int64, error) {
	var resumed, carried int64
	err := d.pool.QueryRow(ctx, `
		WITH removed AS (
			DELETE FROM webhook_endpoints_removed r WHERE r.endpoint = $1
			  AND NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE endpoint = $1)
			RETURNING resume_seq
		), legacy AS (
			SELECT coalesce(
			         (SELECT min(d.seq) - 1 FROM webhook_deliveries d
			          WHERE d.endpoint = l.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL),
			         l.enqueued_seq) AS resume_seq
			FROM webhook_endpoints l
			WHERE l.endpoint = $3 AND NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE endpoint = $1)
		), registered AS (
			INSERT INTO webhook_endpoints (endpoint, events, enqueued_seq)
			VALUES ($1, $2, coalesce((SELECT resume_seq FROM removed), (SELECT resume_seq FROM legacy),
			                         (SELECT last_seq FROM payment_event_seq)))
			ON CONFLICT (endpoint) DO UPDATE SET events = excluded.events, updated_at = now()
			WHERE webhook_endpoints.events IS DISTINCT FROM excluded.events
		)
		SELECT coalesce((SELECT resume_seq FROM removed), -1), coalesce((SELECT resume_seq FROM legacy), -1)`,
		e.Label, d.cfg.Events, e.legacy).Scan(&resumed, &carried)
	if err != nil {
		return 0, fmt.Errorf("registering webhook endpoint %s: %w", e.Label, err)
	}
	if resumed < 0 && carried >= 0 {
		// The legacy label is never logged: it holds the token.
		d.log.Info("webhook endpoint registered under its label with the token-like host labels hidden, from where delivery under its earlier label stood; delete the earlier row once no replica runs an earlier version (docs/webhooks.md)",
			slog.String("endpoint", e.Label), slog.Int64("resumed_after_seq", carried))
	}
	return resumed, nil
}

// reregister registers again an endpoint this replica delivers to whose row
// was deleted, from where delivery stood, and says so loudly: the removal
// procedure takes the URL out of every replica's WEBHOOK_URL first.
func (d *Dispatcher) reregister(ctx context.Context, e Endpoint) error {
	from, err := d.register(ctx, e)
	if err != nil {
		return err
	}
	d.metrics.reregistered.WithLabelValues(e.Label).Inc()
	d.log.Error("the row of a webhook endpoint this replica delivers to was deleted; registered it again from where delivery stood (take the URL out of WEBHOOK_URL on every replica before deleting the row)",
		slog.String("endpoint", e.Label), slog.Int64("resumed_after_seq", from))
	return nil
}
