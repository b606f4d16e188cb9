package webhooks

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/testsignal"
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
