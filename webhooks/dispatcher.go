package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/testsignal"
	"github.com/burnpoller/burnpoller/payments"
)

// Config is what the dispatcher delivers, where, and how patiently.
type Config struct {
	Endpoints []Endpoint
	Secret    string
	// Events are the kinds delivered (payments.Kind*).
	Events []string
	// Timeout bounds one attempt (WEBHOOK_TIMEOUT).
	Timeout time.Duration
	// MaxAge is how long a delivery is retried before it is dead-lettered
	// (WEBHOOK_MAX_AGE).
	MaxAge time.Duration
	// Poll is how often, without a notification, the dispatcher looks for
	// new events and due retries; zero means one second.
	Poll time.Duration
	// Listen, if set, is the pool the wake-up session (LISTEN) comes from:
	// one that reaches Postgres itself, not a transaction pooler. Nil
	// means the dispatcher's pool.
	Listen *pgxpool.Pool
	// Batch is the most deliveries one endpoint claims at once; zero means 8.
	Batch int
	// Backoff, if set, replaces Backoff (tests).
	Backoff func(attempt int) time.Duration
	// Lease is how long, beyond Timeout, a claimed delivery stays this
	// replica's; zero means 3 seconds. A claim's attempt (reading its events
	// and the POST) ends within Timeout of the claim; the lease covers
	// recording the outcome. A replica that dies, freezes or is cut off
	// mid-attempt delays only the deliveries it claimed, by at most
	// Timeout + Lease: another replica then sends them.
	Lease time.Duration
}

// Results of a delivery attempt, the values of
// burnpoller_webhook_deliveries_total's result label.
const (
	ResultDelivered = "delivered"
	ResultFailed    = "failed"
	ResultDead      = "dead"
)

// DefaultLease is Config.Lease's default: enough to record an attempt's
// outcome after its Timeout, short enough that deliveries claimed by a
// replica that froze wait for another only a few seconds past Timeout.
const DefaultLease = 3 * time.Second

// responseCap is how much of a response body is read (and dropped), so that
// the connection can be reused without reading an endless answer.
const responseCap = 64 << 10

// responseHeaderCap caps a response's headers, which responseCap does not
// cover: net/http's default of 10 MiB let one answer of short header lines
// cost 130 MiB. An answer over it fails the attempt, as no answer would.
const responseHeaderCap = 64 << 10

// Dispatcher delivers payment events to the configured endpoints. Every
// replica runs one; they share the work through Postgres.
type Dispatcher struct {
	cfg     Config
	pool    *pgxpool.Pool
	client  *http.Client
	metrics *metrics
	log     *slog.Logger
	// Signals are for tests.
	Signals Signals
}

// Signals tell a test what the dispatcher did.
type Signals struct {
	// Attempted: one attempt ended, or a delivery was dead-lettered
	// without one (its endpoint label, seq and result).
	Attempted testsignal.Signal[Attempt]
}

// Attempt is one delivery attempt's outcome.
type Attempt struct {
	Endpoint string
	Seq      int64
	Result   string
	Status   int
	Err      string
}

// New returns a dispatcher for cfg on pool, with its metrics on reg.
func New(cfg Config, pool *pgxpool.Pool, reg prometheus.Registerer, log *slog.Logger) *Dispatcher {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 8
	}
	if cfg.Lease <= 0 {
		// A replica that dies mid-attempt is retried once the lease
		// runs out (the receiver may then see the event twice, with the
		// same id).
		cfg.Lease = DefaultLease
	}
	if cfg.Backoff == nil {
		cfg.Backoff = func(attempt int) time.Duration { return Backoff(attempt, jitter()) }
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = cfg.Batch
	transport.MaxResponseHeaderBytes = responseHeaderCap
	return &Dispatcher{
		cfg:  cfg,
		pool: pool,
		client: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			// A redirect is an answer that is not 2xx: never followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		metrics: newMetrics(reg, cfg.Endpoints),
		log:     log,
	}
}

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

// Run registers the endpoints and delivers until ctx ends. It returns nil
// then; errors along the way are logged and retried.
func (d *Dispatcher) Run(ctx context.Context) error {
	for {
		err := d.Register(ctx)
		if err == nil {
			break
		}
		d.log.Warn("registering webhook endpoints failed; retrying", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.Poll):
		}
	}
	wakes := make([]chan struct{}, len(d.cfg.Endpoints))
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	var wg sync.WaitGroup
	for i, e := range d.cfg.Endpoints {
		wg.Go(func() { d.deliverLoop(ctx, e, wakes[i]) })
	}
	// The events' one wake-up (consume.Waker): a LISTEN on
	// burnpoller_events, on the Listen pool when set.
	listen := d.pool
	if d.cfg.Listen != nil {
		listen = d.cfg.Listen
	}
	waker := consume.NewWaker(listen, d.cfg.Poll, d.log)
	waker.Start(ctx)
	defer waker.Stop()
	tick := time.NewTicker(d.cfg.Poll)
	defer tick.Stop()
	for ctx.Err() == nil {
		if err := d.enqueueAll(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("enqueueing webhook deliveries failed; retrying", slog.Any("err", err))
		}
		for _, w := range wakes {
			select {
			case w <- struct{}{}:
			default:
			}
		}
		d.observe(ctx)
		select {
		case <-ctx.Done():
		case <-tick.C:
		case <-waker.C():
		}
	}
	wg.Wait()
	return nil
}

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

// claimed is a delivery this replica holds the lease of.
type claimed struct {
	seq      int64
	attempts int
	armedAt  time.Time
}

// deliverLoop delivers one endpoint's due deliveries whenever woken; a slow
// endpoint holds up only itself.
func (d *Dispatcher) deliverLoop(ctx context.Context, e Endpoint, wake <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		for ctx.Err() == nil {
			n, err := d.deliverDue(ctx, e)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("webhook delivery round failed; retrying", slog.String("endpoint", e.Label), slog.Any("err", err))
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
}

// deliverDue dead-letters what is past its age, claims up to Batch due
// deliveries, attempts them concurrently and records each outcome. It
// returns how many it attempted.
func (d *Dispatcher) deliverDue(ctx context.Context, e Endpoint) (int, error) {
	rows, err := d.pool.Query(ctx, `
		UPDATE webhook_deliveries SET dead_at = now()
		WHERE endpoint = $1 AND delivered_at IS NULL AND dead_at IS NULL
		  AND next_attempt_at <= now() AND armed_at + $2::interval <= now()
		RETURNING seq`, e.Label, d.cfg.MaxAge)
	if err != nil {
		return 0, fmt.Errorf("dead-lettering: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("dead-lettering: %w", err)
	}
	for _, seq := range dead {
		d.metrics.deliveries.WithLabelValues(e.Label, ResultDead).Inc()
		d.deadLettered(e, seq, "older than WEBHOOK_MAX_AGE")
		d.Signals.Attempted.Send(Attempt{Endpoint: e.Label, Seq: seq, Result: ResultDead})
	}
	rows, err = d.pool.Query(ctx, `
		UPDATE webhook_deliveries w
		SET attempts = w.attempts + 1, last_attempt_at = now(), next_attempt_at = now() + $3::interval
		FROM (SELECT endpoint, seq FROM webhook_deliveries
		      WHERE endpoint = $1 AND delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
		      ORDER BY next_attempt_at, seq LIMIT $2
		      FOR UPDATE SKIP LOCKED) c
		WHERE w.endpoint = c.endpoint AND w.seq = c.seq
		RETURNING w.seq, w.attempts, w.armed_at`, e.Label, d.cfg.Batch, d.cfg.Timeout+d.cfg.Lease)
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		return c, r.Scan(&c.seq, &c.attempts, &c.armedAt)
	})
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	if len(claims) == 0 {
		return 0, nil
	}
	// The claims' attempts end within Timeout of the claim, reading their
	// events included, so that each outcome is recorded while the lease
	// (Timeout + Lease) still holds; a claim whose attempt could not
	// start is handed back at once.
	actx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	seqs := make([]int64, len(claims))
	for i, c := range claims {
		seqs[i] = c.seq
	}
	evs, err := d.events(actx, seqs)
	if err != nil {
		d.handBack(ctx, e, claims)
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() { d.attempt(ctx, actx, e, c, evs[c.seq]) })
	}
	wg.Wait()
	return len(claims), nil
}

func (d *Dispatcher) events(ctx context.Context, seqs []int64) (map[int64]payments.Event, error) {
	evs, err := payments.NewStore(d.pool).EventsBySeq(ctx, seqs)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]payments.Event, len(evs))
	for _, e := range evs {
		out[e.Seq] = e
	}
	return out, nil
}

// handBack makes claims due again at once, for another attempt (by this
// replica or another) rather than at the end of their lease.
func (d *Dispatcher) handBack(ctx context.Context, e Endpoint, claims []claimed) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, c := range claims {
		_, _ = d.pool.Exec(rctx, `UPDATE webhook_deliveries SET next_attempt_at = now()
			WHERE endpoint = $1 AND seq = $2 AND attempts = $3 AND delivered_at IS NULL`, e.Label, c.seq, c.attempts)
	}
}

// attempt POSTs ev to e once, within actx (the claim's Timeout), and
// records the outcome.
func (d *Dispatcher) attempt(ctx, actx context.Context, e Endpoint, c claimed, ev payments.Event) {
	status, problem := d.post(actx, e, ev)
	if ctx.Err() != nil && problem != "" {
		// Shutting down mid-attempt: hand the delivery back at once
		// rather than at the end of the lease (it may have arrived; the
		// next attempt carries the same id).
		d.handBack(ctx, e, []claimed{c})
		return
	}
	// The outcome is recorded even when a stop comes meanwhile: an answer
	// the endpoint gave must not be asked for again. It is recorded only
	// if the delivery is still this attempt's (attempts unchanged): a
	// re-arm by poller webhooks retry, or another replica's attempt after
	// the lease ran out, is newer. Within the lease: an outcome recorded
	// after it may meet another replica's attempt already under way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease)
	defer cancel()
	var err error
	result := ResultDelivered
	if problem == "" {
		_, err = d.pool.Exec(ctx, `UPDATE webhook_deliveries
			SET delivered_at = now(), last_status = $3, last_error = NULL
			WHERE endpoint = $1 AND seq = $2 AND attempts = $4 AND delivered_at IS NULL`, e.Label, c.seq, status, c.attempts)
	} else {
		wait := d.cfg.Backoff(c.attempts)
		var dead bool
		err = d.pool.QueryRow(ctx, `UPDATE webhook_deliveries
			SET last_status = nullif($3, 0), last_error = left($4, 500), next_attempt_at = now() + $5::interval,
			    dead_at = CASE WHEN now() + $5::interval > armed_at + $6::interval THEN now() END
			WHERE endpoint = $1 AND seq = $2 AND attempts = $7 AND delivered_at IS NULL AND dead_at IS NULL
			RETURNING dead_at IS NOT NULL`, e.Label, c.seq, status, problem, wait, d.cfg.MaxAge, c.attempts).Scan(&dead)
		if errors.Is(err, pgx.ErrNoRows) {
			// Taken over (the lease ran out), delivered, or re-armed by
			// poller webhooks retry meanwhile: the newer state stands.
			err = nil
		}
		result = ResultFailed
		if dead {
			result = ResultDead
		}
	}
	if err != nil {
		d.log.Warn("recording a webhook attempt failed; the delivery is retried when its lease ends",
			slog.String("endpoint", e.Label), slog.Int64("seq", c.seq), slog.Any("err", err))
		return
	}
	d.metrics.deliveries.WithLabelValues(e.Label, result).Inc()
	switch result {
	case ResultDelivered:
		d.log.Debug("webhook delivered", slog.String("endpoint", e.Label), slog.Int64("seq", c.seq),
			slog.String("event_id", ev.EventID), slog.Int("attempts", c.attempts))
	case ResultFailed:
		d.log.Info("webhook attempt failed; will retry", slog.String("endpoint", e.Label), slog.Int64("seq", c.seq),
			slog.Int("attempts", c.attempts), slog.String("error", problem))
	case ResultDead:
		d.deadLettered(e, c.seq, problem)
	}
	d.Signals.Attempted.Send(Attempt{Endpoint: e.Label, Seq: c.seq, Result: result, Status: status, Err: problem})
}

func (d *Dispatcher) deadLettered(e Endpoint, seq int64, why string) {
	d.log.Error("webhook dead-lettered: retries ran out (WEBHOOK_MAX_AGE); poller webhooks retry --dead sends it again",
		slog.String("endpoint", e.Label), slog.Int64("seq", seq), slog.String("last_error", why))
}

// post sends ev to e once. It returns the HTTP status (0 without an
// answer) and, unless the answer was 2xx, what went wrong (e.problem):
// the endpoint named by its label, never its URL or host.
func (d *Dispatcher) post(ctx context.Context, e Endpoint, ev payments.Event) (int, string) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, e.problem("encoding the event: " + err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return 0, e.problem("building the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "burnpoller-webhooks")
	req.Header.Set(HeaderEventID, ev.EventID)
	req.Header.Set(HeaderSignature, Sign(d.cfg.Secret, time.Now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, e.problem(describe(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, responseCap))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, e.problem("HTTP " + strconv.Itoa(resp.StatusCode))
	}
	return resp.StatusCode, ""
}
