package poller

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueUsageName is the gauge NewQueueUsageCollector exports.
const queueUsageName = "burnpoller_notification_queue_usage"

// queueUsageCollector reads the notification queue's usage on each scrape.
type queueUsageCollector struct {
	read    func(context.Context) (float64, error)
	timeout time.Duration
	desc    *prometheus.Desc
}

// NewQueueUsageCollector returns a collector of the gauge
// burnpoller_notification_queue_usage: the fraction, from 0 to 1, of the
// Postgres server's notification queue in use, as read returns it
// (payments.(*Store).NotificationQueueUsage). It reads on each scrape,
// bounded by timeout. When the read fails or runs out of time, the scrape
// carries no sample of the gauge and the rest of /metrics is served as
// usual: never an error, which could quote the database. A database that
// does not answer is /readyz's to report.
func NewQueueUsageCollector(read func(context.Context) (float64, error), timeout time.Duration) prometheus.Collector {
	return &queueUsageCollector{
		read:    read,
		timeout: timeout,
		desc: prometheus.NewDesc(queueUsageName,
			"Fraction (0 to 1) of the Postgres server's notification queue in use; a listener that stops consuming pins it, and a full queue fails every commit that notifies.",
			nil, nil),
	}
}

// Describe sends the gauge's description.
func (c *queueUsageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
}

// Collect reads the usage and sends it, or nothing if the read fails.
func (c *queueUsageCollector) Collect(ch chan<- prometheus.Metric) {
	// Prometheus' Collect carries no context: the timeout is this read's
	// only bound, and a scrape never waits longer than it.
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	usage, err := c.read(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, usage)
}
