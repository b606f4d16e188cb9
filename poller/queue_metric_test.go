package poller_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

// queueUsage gathers reg and returns burnpoller_notification_queue_usage,
// and whether it was there; an error if gathering failed or the gauge is
// not one sample.
func queueUsage(reg *prometheus.Registry) (float64, bool, error) {
	fams, err := reg.Gather()
	if err != nil {
		return 0, false, fmt.Errorf("gathering: %w", err)
	}
	for _, f := range fams {
		if f.GetName() != "burnpoller_notification_queue_usage" {
			continue
		}
		if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
			return 0, false, fmt.Errorf("want one gauge sample, got %v", f)
		}
		return f.GetMetric()[0].GetGauge().GetValue(), true, nil
	}
	return 0, false, nil
}

// TestQueueUsageGauge scrapes the gauge from a real database while a
// listener that stopped consuming pins the queue under about 16 MiB of
// notifications: it reads at least that much.
func TestQueueUsageGauge(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	store := payments.NewStore(pool)
	reg := prometheus.NewRegistry()
	// The read's timeout is not under test here: a generous one keeps a
	// busy database from dropping the sample.
	reg.MustRegister(poller.NewQueueUsageCollector(store.NotificationQueueUsage, 30*time.Second))

	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	idle, ok, err := queueUsage(reg)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || idle < 0 || idle >= 1 {
		t.Fatalf("usage = %v (present: %v), want a sample in [0, 1)", idle, ok)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stuck, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close(context.Background())
	if _, err := stuck.Exec(ctx, `LISTEN queue_metric_test`); err != nil {
		t.Fatal(err)
	}
	// In a transaction a session reads no notifications: it stopped consuming.
	if _, err := stuck.Exec(ctx, `BEGIN; SELECT 1`); err != nil {
		t.Fatal(err)
	}
	const pages = 2000 // of the 2^20 pages of the queue
	if _, err := pool.Exec(ctx, `SELECT pg_notify('queue_metric_test', g || repeat('x', 7990)) FROM generate_series(1, $1) g`, pages); err != nil {
		t.Fatal(err)
	}
	// Other sessions of the server may notify or stop listening meanwhile,
	// but the queue is freed only up to where the stuck listener stands.
	got, ok, err := queueUsage(reg)
	if err != nil {
		t.Fatal(err)
	}
	if least := 0.9 * pages / float64(1<<20); !ok || got < least || got > 1 {
		t.Fatalf("usage = %v (present: %v), want between %v and 1", got, ok, least)
	}
}

// TestQueueUsageGaugeOmittedOnError: a failed or slow read leaves the gauge
// out of the scrape, with no error and nothing of the error's text. A read
// slower than the timeout (a query sleeping for an hour) is cut off by the
// collector's own deadline: the read sees its context's deadline expire, and
// the scrape ends at all. The minute's guard, 300 times the timeout, only
// keeps a collector that ignored it from hanging the test.
func TestQueueUsageGaugeOmittedOnError(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	tests := []struct {
		name string
		read func(context.Context) (float64, error)
		// cut: the read must end by the collector's deadline.
		cut bool
	}{
		{
			name: "query error",
			read: func(ctx context.Context) (float64, error) {
				var v float64
				err := pool.QueryRow(ctx, `SELECT 'secret-db-detail'::float8`).Scan(&v)
				return v, err
			},
		},
		{
			name: "slower than the timeout",
			read: func(ctx context.Context) (float64, error) {
				var v float64
				err := pool.QueryRow(ctx, `SELECT 0.5 FROM pg_sleep(3600)`).Scan(&v)
				return v, err
			},
			cut: true,
		},
		{
			name: "database gone",
			read: func(ctx context.Context) (float64, error) {
				return 0, errors.New("connect to secret-db-detail failed")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The read's context as it ended, seen from inside the read.
			readEnded := make(chan error, 1)
			read := func(ctx context.Context) (float64, error) {
				// The end of the test ends the read too, so that a collector
				// that ignored its timeout fails the test rather than hangs it.
				ctx, stop := context.WithCancel(ctx)
				defer stop()
				defer context.AfterFunc(t.Context(), stop)()
				v, err := tt.read(ctx)
				select {
				case readEnded <- ctx.Err():
				default:
				}
				return v, err
			}
			reg := prometheus.NewRegistry()
			other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "burnpoller_other", Help: "A neighbour."})
			other.Set(7)
			reg.MustRegister(poller.NewQueueUsageCollector(read, 200*time.Millisecond), other)
			scraped := make(chan struct{})
			var (
				v   float64
				ok  bool
				err error
			)
			go func() {
				defer close(scraped)
				v, ok, err = queueUsage(reg)
			}()
			select {
			case <-scraped:
			case <-time.After(time.Minute):
				t.Fatal("scrape still running a minute into a 200ms timeout")
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				t.Fatalf("usage = %v, want no sample", v)
			}
			if err := <-readEnded; tt.cut && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the slow read's context ended with %v, want the collector's deadline", err)
			}
			if n := testutil.ToFloat64(other); n != 7 {
				t.Fatalf("neighbour = %v, want 7", n)
			}
			var text strings.Builder
			fams, _ := reg.Gather()
			for _, f := range fams {
				text.WriteString(f.String())
			}
			if !strings.Contains(text.String(), "burnpoller_other") || strings.Contains(text.String(), "secret-db-detail") {
				t.Fatalf("scrape = %s, want the neighbour and nothing of the error", text.String())
			}
		})
	}
}
