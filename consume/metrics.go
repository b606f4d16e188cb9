package consume

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Progress is where a consumer stands, reported to OnProgress after each
// batch it committed and each read that found nothing new.
type Progress struct {
	// Name is the consumer's name.
	Name string
	// Offset is the consumer's offset: every event up to it was handled
	// or filtered out.
	Offset Position
	// Last is payment_events' last seq when the batch read it.
	Last int64
	// Handled is how many events this batch handed to the handler.
	Handled int
	// Standby says another consumer of the name held its offset row (or,
	// for RunAtLeastOnce, its lease) when this one tried to take it: this
	// one handled nothing.
	Standby bool
}

// Lag is how many committed events the consumer has still to read.
func (p Progress) Lag() int64 { return max(p.Last-p.Offset.Seq, 0) }

// metrics are the consumer's collectors, labelled consumer=<name>:
//
//	burnpoller_consumer_offset_seq   gauge    the consumer's offset
//	burnpoller_consumer_lag_events   gauge    committed events after the offset
//	burnpoller_consumer_handled_total counter events handed to the handler and committed
//	burnpoller_consumer_failures_total counter batches that failed and were retried
type metrics struct {
	offset   prometheus.Gauge
	lag      prometheus.Gauge
	handled  prometheus.Counter
	failures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, name string) (*metrics, error) {
	labels := prometheus.Labels{"consumer": name}
	m := &metrics{
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_consumer_offset_seq", ConstLabels: labels,
			Help: "The consumer's offset: the last payment_events seq it handled or filtered out.",
		}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_consumer_lag_events", ConstLabels: labels,
			Help: "Committed payment events after the consumer's offset, as last read.",
		}),
		handled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_consumer_handled_total", ConstLabels: labels,
			Help: "Events this process handed to the consumer's handler in batches that then committed.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_consumer_failures_total", ConstLabels: labels,
			Help: "Batches of this process that failed (handler or database) and were retried.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.offset, m.lag, m.handled, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("consume: registering the metrics of consumer %q: %w", name, err)
		}
	}
	return m, nil
}

func (m *metrics) observe(p Progress) {
	m.offset.Set(float64(p.Offset.Seq))
	m.lag.Set(float64(p.Lag()))
	m.handled.Add(float64(p.Handled))
}
