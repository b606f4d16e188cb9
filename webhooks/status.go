package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	deliveries *prometheus.CounterVec
	oldest     *prometheus.GaugeVec
	dead       *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, eps []Endpoint) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_webhook_deliveries_total",
			Help: "Webhook delivery attempts by endpoint (redacted label) and result: delivered (2xx), failed (retried), dead (dead-lettered).",
		}, []string{"endpoint", "result"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_webhook_oldest_undelivered_seconds",
			Help: "Age of the oldest event owed to the endpoint and neither delivered nor dead-lettered (0 when none), including events not yet queued.",
		}, []string{"endpoint"}),
		dead: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_webhook_dead_letters",
			Help: "Deliveries to the endpoint dead-lettered after WEBHOOK_MAX_AGE and not retried since (poller webhooks retry --dead).",
		}, []string{"endpoint"}),
	}
	for _, e := range eps {
		for _, r := range []string{ResultDelivered, ResultFailed, ResultDead} {
			m.deliveries.WithLabelValues(e.Label, r)
		}
		m.oldest.WithLabelValues(e.Label)
		m.dead.WithLabelValues(e.Label)
	}
	reg.MustRegister(m.deliveries, m.oldest, m.dead)
	return m
}

// EndpointStatus is where one endpoint's deliveries stand.
type EndpointStatus struct {
	Endpoint string   `json:"endpoint"`
	Events   []string `json:"events"`
	// EnqueuedSeq is the last event looked at for the endpoint; Backlog
	// counts events owed and not delivered (queued or not yet queued,
	// dead letters apart), OldestUndelivered the age of the oldest.
	EnqueuedSeq       int64   `json:"enqueued_seq"`
	LastSeq           int64   `json:"last_seq"`
	Backlog           int64   `json:"backlog"`
	OldestUndelivered float64 `json:"oldest_undelivered_seconds"`
	Retrying          int64   `json:"retrying"`
	DeadLetters       int64   `json:"dead_letters"`
	Delivered         int64   `json:"delivered"`
}

// Status reads every registered endpoint's deliveries. With detail, it
// counts delivered rows too (a scan of the endpoint's history).
func Status(ctx context.Context, pool *pgxpool.Pool, detail bool) ([]EndpointStatus, error) {
	rows, err := pool.Query(ctx, `
		SELECT e.endpoint, e.events, e.enqueued_seq, s.last_seq,
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL),
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.attempts > 0),
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.dead_at IS NOT NULL AND d.delivered_at IS NULL),
		       CASE WHEN $1 THEN (SELECT count(*) FROM webhook_deliveries d
		                          WHERE d.endpoint = e.endpoint AND d.delivered_at IS NOT NULL) ELSE 0 END,
		       coalesce(extract(epoch FROM now() - least(
		           (SELECT min(ev.created_at) FROM webhook_deliveries d JOIN payment_events ev ON ev.seq = d.seq
		            WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL),
		           (SELECT min(ev.created_at) FROM payment_events ev
		            WHERE ev.seq > e.enqueued_seq AND ev.kind = ANY(e.events)))), 0)::float8,
		       (SELECT count(*) FROM payment_events ev WHERE ev.seq > e.enqueued_seq AND ev.kind = ANY(e.events))
		FROM webhook_endpoints e CROSS JOIN payment_event_seq s
		ORDER BY e.endpoint`, detail)
	if err != nil {
		return nil, fmt.Errorf("reading webhook status: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndpointStatus, error) {
		var (
			s         EndpointStatus
			notQueued int64
		)
		err := r.Scan(&s.Endpoint, &s.Events, &s.EnqueuedSeq, &s.LastSeq, &s.Backlog, &s.Retrying, &s.DeadLetters,
			&s.Delivered, &s.OldestUndelivered, &notQueued)
		s.Backlog += notQueued
		return s, err
	})
}

// observe refreshes the gauges from the database.
func (d *Dispatcher) observe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := Status(ctx, d.pool, false)
	if err != nil {
		d.log.Debug("reading webhook status for the metrics", "err", err)
		return
	}
	for _, s := range st {
		for _, e := range d.cfg.Endpoints {
			if e.Label == s.Endpoint {
				d.metrics.oldest.WithLabelValues(s.Endpoint).Set(s.OldestUndelivered)
				d.metrics.dead.WithLabelValues(s.Endpoint).Set(float64(s.DeadLetters))
			}
		}
	}
}

// RetryDead re-arms every dead letter (of every endpoint): retried from
// now, for another WEBHOOK_MAX_AGE. It returns how many.
func RetryDead(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	tag, err := pool.Exec(ctx, `UPDATE webhook_deliveries
		SET dead_at = NULL, armed_at = now(), next_attempt_at = now(), attempts = 0
		WHERE dead_at IS NOT NULL AND delivered_at IS NULL`)
	if err != nil {
		return 0, fmt.Errorf("re-arming dead letters: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RetrySeq (re)sends event seq to every registered endpoint subscribed to
// its kind, delivered before or not. It returns how many endpoints, and an
// error when there is no such event.
func RetrySeq(ctx context.Context, pool *pgxpool.Pool, seq int64) (int64, error) {
	var kind string
	if err := pool.QueryRow(ctx, `SELECT kind FROM payment_events WHERE seq = $1`, seq).Scan(&kind); err != nil {
		if err == pgx.ErrNoRows {
			return 0, fmt.Errorf("no event with seq %d", seq)
		}
		return 0, fmt.Errorf("reading event %d: %w", seq, err)
	}
	tag, err := pool.Exec(ctx, `
		INSERT INTO webhook_deliveries (endpoint, seq, event_id)
		SELECT e.endpoint, ev.seq, ev.event_id FROM webhook_endpoints e, payment_events ev
		WHERE ev.seq = $1 AND ev.kind = ANY(e.events)
		ON CONFLICT (endpoint, seq) DO UPDATE SET delivered_at = NULL, dead_at = NULL, armed_at = now(),
		    next_attempt_at = now(), attempts = 0`, seq)
	if err != nil {
		return 0, fmt.Errorf("re-arming event %d: %w", seq, err)
	}
	return tag.RowsAffected(), nil
}
