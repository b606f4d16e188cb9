package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	deliveries   *prometheus.CounterVec
	oldest       *prometheus.GaugeVec
	dead         *prometheus.GaugeVec
	reregistered *prometheus.CounterVec
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
		reregistered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_webhook_endpoint_reregistered_total",
			Help: "Times this replica found the row of an endpoint it delivers to deleted (webhook_endpoints) and registered it again from where delivery stood: remove the URL from WEBHOOK_URL on every replica before deleting the row.",
		}, []string{"endpoint"}),
	}
	for _, e := range eps {
		for _, r := range []string{ResultDelivered, ResultFailed, ResultDead} {
			m.deliveries.WithLabelValues(e.Label, r)
		}
		m.oldest.WithLabelValues(e.Label)
		m.dead.WithLabelValues(e.Label)
		m.reregistered.WithLabelValues(e.Label)
	}
	reg.MustRegister(m.deliveries, m.oldest, m.dead, m.reregistered)
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
	// LastError is what went wrong in the latest failed attempt of a
	// delivery not delivered (retrying or dead-lettered), "" when none:
	// "POST <label>: <what>", the endpoint named only by its label.
	LastError string `json:"last_error"`
}

// Status reads every registered endpoint's deliveries and the last error
// of those not delivered. With detail, it counts delivered rows too (a
// scan of the endpoint's history).
func Status(ctx context.Context, pool *pgxpool.Pool, detail bool) ([]EndpointStatus, error) {
	return StatusOf(ctx, pool, detail, nil)
}

// Burns selects the events of one group's burns: those of its chain and
// contracts (lowercase 0x hex).
type Burns struct {
	ChainID   uint64
	Contracts []string
}

// StatusOf is Status counting only the events of of (nil: every event):
// the backlog, retries, dead letters and deliveries owed to each endpoint
// for one group. EnqueuedSeq and LastSeq stay the log's.
func StatusOf(ctx context.Context, pool *pgxpool.Pool, detail bool, of *Burns) ([]EndpointStatus, error) {
	args := []any{detail}
	// ofDelivery and ofEvent restrict a delivery d and an event ev to
	// the group's burns; both are true without a group.
	ofDelivery, ofEvent := "true", "true"
	if of != nil {
		args = append(args, int64(of.ChainID), of.Contracts)
		ofDelivery = `EXISTS (SELECT 1 FROM payment_events gev WHERE gev.seq = d.seq AND gev.chain_id = $2 AND gev.contract = ANY($3))`
		ofEvent = `ev.chain_id = $2 AND ev.contract = ANY($3)`
	}
	rows, err := pool.Query(ctx, `
		SELECT e.endpoint, e.events, e.enqueued_seq, s.last_seq,
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL AND `+ofDelivery+`),
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL AND d.attempts > 0 AND `+ofDelivery+`),
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.dead_at IS NOT NULL AND d.delivered_at IS NULL AND `+ofDelivery+`),
		       CASE WHEN $1 THEN (SELECT count(*) FROM webhook_deliveries d
		                          WHERE d.endpoint = e.endpoint AND d.delivered_at IS NOT NULL AND `+ofDelivery+`) ELSE 0 END,
		       `+oldestOwedOf(ofDelivery, ofEvent)+`,
		       (SELECT count(*) FROM payment_events ev WHERE ev.seq > e.enqueued_seq AND ev.kind = ANY(e.events) AND `+ofEvent+`),
		       coalesce((SELECT d.last_error FROM webhook_deliveries d
		                 WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.last_error IS NOT NULL AND `+ofDelivery+`
		                 ORDER BY d.last_attempt_at DESC NULLS LAST, d.seq DESC LIMIT 1), '')
		FROM webhook_endpoints e CROSS JOIN payment_event_seq s
		ORDER BY e.endpoint`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading webhook status: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndpointStatus, error) {
		var (
			s         EndpointStatus
			notQueued int64
		)
		err := r.Scan(&s.Endpoint, &s.Events, &s.EnqueuedSeq, &s.LastSeq, &s.Backlog, &s.Retrying, &s.DeadLetters,
			&s.Delivered, &s.OldestUndelivered, &notQueued, &s.LastError)
		s.Backlog += notQueued
		return s, err
	})
}

// oldestOwed is the age in seconds of the oldest event owed to endpoint e
// and neither delivered nor dead-lettered (0 when none): the first
// undelivered delivery by seq (the deliveries' partial index holds only
// those), or else the first subscribed event not queued yet. Each is one
// lookup, whatever the endpoint's history or how far behind it is.
var oldestOwed = oldestOwedOf("true", "true")

// oldestOwedOf is oldestOwed of the deliveries and events the conditions
// select (see StatusOf).
func oldestOwedOf(ofDelivery, ofEvent string) string {
	return `coalesce(extract(epoch FROM now() - least(
		(SELECT ev.created_at FROM payment_events ev WHERE ev.seq = (
		    SELECT min(d.seq) FROM webhook_deliveries d
		    WHERE d.endpoint = e.endpoint AND d.delivered_at IS NULL AND d.dead_at IS NULL AND ` + ofDelivery + `)),
		(SELECT ev.created_at FROM payment_events ev
		 WHERE ev.seq > e.enqueued_seq AND ev.kind = ANY(e.events) AND ` + ofEvent + ` ORDER BY ev.seq LIMIT 1))), 0)::float8`
}

// gauges reads, for the metrics of the endpoints named, the age of the
// oldest event owed and the dead letters: bounded lookups only, so that an
// endpoint far behind (or one no replica delivers to any more) costs the
// same as any other, and an endpoint not named costs nothing.
func gauges(ctx context.Context, pool *pgxpool.Pool, labels []string) (map[string][2]float64, error) {
	rows, err := pool.Query(ctx, `
		SELECT e.endpoint, `+oldestOwed+`,
		       (SELECT count(*) FROM webhook_deliveries d
		        WHERE d.endpoint = e.endpoint AND d.dead_at IS NOT NULL AND d.delivered_at IS NULL)::float8
		FROM webhook_endpoints e WHERE e.endpoint = ANY($1)`, labels)
	if err != nil {
		return nil, fmt.Errorf("reading webhook gauges: %w", err)
	}
	defer rows.Close()
	out := map[string][2]float64{}
	for rows.Next() {
		var (
			label        string
			oldest, dead float64
		)
		if err := rows.Scan(&label, &oldest, &dead); err != nil {
			return nil, fmt.Errorf("reading webhook gauges: %w", err)
		}
		out[label] = [2]float64{oldest, dead}
	}
	return out, rows.Err()
}

// observe refreshes the gauges from the database.
func (d *Dispatcher) observe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	labels := make([]string, len(d.cfg.Endpoints))
	for i, e := range d.cfg.Endpoints {
		labels[i] = e.Label
	}
	g, err := gauges(ctx, d.pool, labels)
	if err != nil {
		d.log.Debug("reading webhook status for the metrics", "err", err)
		return
	}
	for label, v := range g {
		d.metrics.oldest.WithLabelValues(label).Set(v[0])
		d.metrics.dead.WithLabelValues(label).Set(v[1])
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
		if errors.Is(err, pgx.ErrNoRows) {
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
