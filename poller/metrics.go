package poller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Poll results, the values of burnpoller_polls_total's result label.
const (
	ResultCommitted = "committed"
	ResultIdle      = "idle"
	ResultStandby   = "standby"
	ResultError     = "error"
)

// Metrics are the poller's Prometheus collectors, registered on the registry
// given to NewMetrics.
type Metrics struct {
	CursorBlock       prometheus.Gauge
	TargetBlock       prometheus.Gauge
	TargetChecked     prometheus.Gauge
	HeadBlock         prometheus.Gauge
	LagBlocks         prometheus.Gauge
	PaymentsInserted  prometheus.Counter
	PaymentsDuplicate prometheus.Counter
	Polls             *prometheus.CounterVec
	PollDuration      prometheus.Histogram
	LockWait          prometheus.Histogram
	LockHeld          prometheus.Gauge
	RPCRequests       *prometheus.CounterVec
	ComputeUnits      *prometheus.CounterVec
	RPCDuration       *prometheus.HistogramVec
	FinalityViolation prometheus.Gauge
	RejectedLogs      prometheus.Counter
	Rescans           prometheus.Counter
	RescanRecovered   prometheus.Counter
	RPCErrors         *prometheus.CounterVec
	NodeLagging       *prometheus.CounterVec
	NodeBehind        *prometheus.GaugeVec
	RangeLimitBlocks  *prometheus.GaugeVec
	EndpointActive    *prometheus.GaugeVec
	HeadSubscription  prometheus.Gauge
	Events            *prometheus.CounterVec
	PendingPayments   prometheus.Gauge
	HeadTracking      *prometheus.CounterVec
	HeadTrackingFails prometheus.Gauge
	NodeFaults        *prometheus.CounterVec
	QuorumDisagree    *prometheus.CounterVec
	ContractBackfill  *prometheus.GaugeVec
	// weights price each call in ComputeUnits (WeighCalls).
	weights chain.Weights
}

// NewMetrics builds the collectors and registers them, with
// burnpoller_build_info, on reg: the metrics of a process that serves one
// group.
func NewMetrics(reg prometheus.Registerer, version, revision, goVersion string) *Metrics {
	m := NewGroupMetrics(reg)
	RegisterBuildInfo(reg, version, revision, goVersion)
	return m
}

// RegisterBuildInfo registers burnpoller_build_info on reg, once per
// process.
func RegisterBuildInfo(reg prometheus.Registerer, version, revision, goVersion string) {
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "burnpoller_build_info",
		Help: "Always 1; labels name the build.",
	}, []string{"version", "revision", "goversion"})
	buildInfo.WithLabelValues(version, revision, goVersion).Set(1)
	reg.MustRegister(buildInfo)
}

// NewGroupMetrics builds one group's collectors and registers them on reg
// (for a named group, a registerer that labels them with its name).
func NewGroupMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		weights: chain.DefaultWeights(),
		CursorBlock: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_cursor_block",
			Help: "Last block whose burns this replica saw committed (the cursor).",
		}),
		TargetBlock: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_target_block",
			Help: "Highest block the poller may process under the configured finality.",
		}),
		TargetChecked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_target_checked_timestamp_seconds",
			Help: "When this replica last knew where the finality target stands against the cursor (Unix time): it read the target, or found the cursor at the head, which the target never passes. Every poll of an idle chain checks it; a replica that keeps polling without it is stalled.",
		}),
		HeadBlock: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_head_block",
			Help: "The head block this replica last read while keeping up with the chain (0 before it read one).",
		}),
		LagBlocks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_lag_blocks",
			Help: "Target block minus cursor block, as last seen by this replica while holding the lock.",
		}),
		PaymentsInserted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_payments_inserted_total",
			Help: "Payments this replica inserted and committed.",
		}),
		PaymentsDuplicate: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_payments_duplicate_total",
			Help: "Payments this replica found already recorded (insert skipped by the unique constraint) in committed ranges.",
		}),
		Polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_polls_total",
			Help: "Poll transactions by result: committed (cursor advanced), idle (at target), standby (lock held elsewhere), error.",
		}, []string{"result"}),
		PollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "burnpoller_poll_duration_seconds",
			Help:    "Duration of poll transactions, lock wait included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}),
		LockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "burnpoller_lock_wait_seconds",
			Help:    "Time spent waiting for the cursor row lock, standby waits included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 3, 12),
		}),
		LockHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_lock_held",
			Help: "1 while this replica holds the cursor row lock, else 0.",
		}),
		RPCRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_rpc_requests_total",
			Help: "JSON-RPC method calls to the node by method and result.",
		}, []string{"method", "result"}),
		ComputeUnits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_rpc_compute_units_total",
			Help: "What the JSON-RPC calls to each endpoint cost at the provider, in its compute units: each call (a batch's members one each) weighed by its method's price in RPC_COMPUTE_UNITS.",
		}, []string{"endpoint"}),
		RPCDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "burnpoller_rpc_duration_seconds",
			Help:    "JSON-RPC call duration by method (batch members share the batch's duration).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"method"}),
		FinalityViolation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_finality_violation",
			Help: "1 once the chain contradicted the committed cursor (a reorg below the target); latched until an operator moves the cursor (poller cursor reset).",
		}),
		RejectedLogs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_rejected_logs_total",
			Help: "Burn-event logs of the burn contract that did not decode, recorded in rejected_logs and not credited.",
		}),
		Rescans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_rescans_total",
			Help: "Completed rescans of committed blocks below the cursor.",
		}),
		RescanRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "burnpoller_rescan_recovered_total",
			Help: "Payments a rescan found missing from committed blocks and inserted: a node had answered with less than the chain holds.",
		}),
		RPCErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_rpc_errors_total",
			Help: "Failed JSON-RPC calls by endpoint (redacted) and class: throttled, transient, permanent, range_limit, bad_reply.",
		}, []string{"endpoint", "class"}),
		NodeLagging: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_node_lagging_total",
			Help: "Times an endpoint reported a target below the highest seen.",
		}, []string{"endpoint"}),
		NodeBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_node_behind_blocks",
			Help: "How far an endpoint's target was behind the highest seen when it last lagged (0 once it caught up).",
		}, []string{"endpoint"}),
		RangeLimitBlocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_range_limit_blocks",
			Help: "The eth_getLogs block range limit learned for an endpoint.",
		}, []string{"endpoint"}),
		EndpointActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_endpoint_active",
			Help: "1 for the endpoint in use, 0 for the others.",
		}, []string{"endpoint"}),
		HeadSubscription: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_head_subscription_up",
			Help: "1 while the newHeads subscription on RPC_WS_URL is up (0 without RPC_WS_URL, or while polling alone).",
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_events_total",
			Help: "Payment lifecycle events this replica recorded and committed, by kind: seen, retracted, confirmed.",
		}, []string{"kind"}),
		PendingPayments: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_pending_payments",
			Help: "Burns seen above the finality target (pending_payments) of this contract, as this replica's head tracking last left them.",
		}),
		HeadTracking: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_head_tracking_total",
			Help: "Head tracking passes by result: ok, error (the ledger goes on regardless), skipped (behind the target or lock held elsewhere).",
		}, []string{"result"}),
		HeadTrackingFails: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "burnpoller_head_tracking_failing",
			Help: "1 while this replica's last head tracking pass failed; pending payments may be stale (the ledger is not affected).",
		}),
		NodeFaults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_node_faults_total",
			Help: "Logs that transaction receipts contradicted, by endpoint and kind: unconfirmed_burn (in the eth_getLogs reply, not in its receipt as replied: never credited), hidden_burn (in the receipts, left out of the reply: recorded from the receipt).",
		}, []string{"endpoint", "kind"}),
		QuorumDisagree: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "burnpoller_quorum_disagreements_total",
			Help: "Ranges for which an endpoint's answer differed from the quorum's (or, without one, from the others'); that endpoint is demoted and nothing it alone said is credited.",
		}, []string{"endpoint"}),
		ContractBackfill: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "burnpoller_contract_backfill_remaining_blocks",
			Help: "Blocks of a contract added to the group still to be read below the cursor; 0 once its history is complete.",
		}, []string{"contract"}),
	}
	for _, r := range []string{ResultCommitted, ResultIdle, ResultStandby, ResultError} {
		m.Polls.WithLabelValues(r)
	}
	for _, k := range payments.Kinds {
		m.Events.WithLabelValues(k)
	}
	for _, r := range []string{headOK, headError, headSkipped} {
		m.HeadTracking.WithLabelValues(r)
	}
	reg.MustRegister(m.CursorBlock, m.TargetBlock, m.TargetChecked, m.HeadBlock, m.LagBlocks, m.PaymentsInserted, m.PaymentsDuplicate,
		m.Polls, m.PollDuration, m.LockWait, m.LockHeld, m.RPCRequests, m.ComputeUnits, m.RPCDuration, m.FinalityViolation,
		m.RejectedLogs, m.Rescans, m.RescanRecovered, m.RPCErrors, m.NodeLagging, m.NodeBehind, m.RangeLimitBlocks,
		m.EndpointActive, m.HeadSubscription, m.Events, m.PendingPayments, m.HeadTracking, m.HeadTrackingFails,
		m.NodeFaults, m.QuorumDisagree, m.ContractBackfill)
	return m
}

// WeighCalls sets the price of each method in compute units
// (RPC_COMPUTE_UNITS; chain.DefaultWeights until called). Call it before
// the first call is recorded.
func (m *Metrics) WeighCalls(w chain.Weights) { m.weights = w }

// RPC records one JSON-RPC method call (chain.Observer). A call the caller
// cancelled is counted as a request, not as the endpoint's error; every
// call is weighed in compute units, as a provider bills it, whatever its
// result.
func (m *Metrics) RPC(endpoint, method, result string, took time.Duration) {
	m.RPCRequests.WithLabelValues(method, result).Inc()
	if w := m.weights.Of(method); w > 0 {
		m.ComputeUnits.WithLabelValues(endpoint).Add(w)
	}
	m.RPCDuration.WithLabelValues(method).Observe(took.Seconds())
	switch result {
	case chain.ResultOK:
		m.NodeBehind.WithLabelValues(endpoint).Set(0)
	case chain.ResultCanceled:
	default:
		m.RPCErrors.WithLabelValues(endpoint, result).Inc()
	}
}

// BadReply counts a reply that failed validation (chain.Observer).
func (m *Metrics) BadReply(endpoint, _ string) {
	m.RPCErrors.WithLabelValues(endpoint, "bad_reply").Inc()
}

// NodeFault counts logs receipts contradicted (chain.FaultObserver).
func (m *Metrics) NodeFault(endpoint, kind string, n int) {
	m.NodeFaults.WithLabelValues(endpoint, kind).Add(float64(n))
}

// Disagreement counts an endpoint outvoted on a range (chain.QuorumObserver).
func (m *Metrics) Disagreement(endpoint string) {
	m.QuorumDisagree.WithLabelValues(endpoint).Inc()
}

// Lagging records an endpoint behind the highest target (chain.EndpointsObserver).
func (m *Metrics) Lagging(endpoint string, behind int64) {
	m.NodeLagging.WithLabelValues(endpoint).Inc()
	m.NodeBehind.WithLabelValues(endpoint).Set(float64(behind))
}

// RangeLimit records an endpoint's learned range limit (chain.EndpointsObserver).
func (m *Metrics) RangeLimit(endpoint string, blocks uint64) {
	m.RangeLimitBlocks.WithLabelValues(endpoint).Set(float64(blocks))
}

// HeadsUp records whether the newHeads subscription is up.
func (m *Metrics) HeadsUp(up bool) {
	m.HeadSubscription.Set(map[bool]float64{true: 1}[up])
}

// Active marks the endpoint in use (chain.EndpointsObserver).
func (m *Metrics) Active(endpoint string) {
	m.EndpointActive.Reset()
	m.EndpointActive.WithLabelValues(endpoint).Set(1)
}

// The recorders below are what the loop and the writers report; a nil
// *Metrics (a verify, a test) records nothing.

// committed counts a committed range transaction.
func (m *Metrics) committed(t Totals) {
	if m == nil {
		return
	}
	m.PaymentsInserted.Add(float64(t.Inserted))
	m.PaymentsDuplicate.Add(float64(t.Duplicates))
	m.RejectedLogs.Add(float64(t.Rejected))
	for k, n := range t.Events {
		m.Events.WithLabelValues(k).Add(float64(n))
	}
	if t.Rescanned {
		m.Rescans.Inc()
		m.RescanRecovered.Add(float64(t.Recovered))
	}
}

// headTracked records a head tracking pass: its result, and the pending
// rows it left (when it ran).
func (m *Metrics) headTracked(result string, pending int) {
	if m == nil {
		return
	}
	m.HeadTracking.WithLabelValues(result).Inc()
	switch result {
	case headOK:
		m.HeadTrackingFails.Set(0)
		m.PendingPayments.Set(float64(pending))
	case headError:
		m.HeadTrackingFails.Set(1)
	}
}

func (m *Metrics) cursor(block int64) {
	if m != nil {
		m.CursorBlock.Set(float64(block))
	}
}

func (m *Metrics) target(highest, cursor int64) {
	if m != nil {
		m.TargetBlock.Set(float64(highest))
		m.LagBlocks.Set(float64(max(highest-cursor, 0)))
	}
}

func (m *Metrics) targetChecked(at time.Time) {
	if m != nil {
		m.TargetChecked.Set(float64(at.UnixNano()) / 1e9)
	}
}

func (m *Metrics) head(block int64) {
	if m != nil {
		m.HeadBlock.Set(float64(block))
	}
}

func (m *Metrics) poll(took time.Duration, result string) {
	if m != nil {
		m.PollDuration.Observe(took.Seconds())
		m.Polls.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) lockWait(took time.Duration) {
	if m != nil {
		m.LockWait.Observe(took.Seconds())
	}
}

func (m *Metrics) lockHeld(held bool) {
	if m != nil {
		m.LockHeld.Set(map[bool]float64{true: 1}[held])
	}
}

func (m *Metrics) violation(latched bool) {
	if m != nil {
		m.FinalityViolation.Set(map[bool]float64{true: 1}[latched])
	}
}

// memberBackfill records the blocks left of a contract's backfill.
func (m *Metrics) memberBackfill(contract string, left int64) {
	if m == nil {
		return
	}
	m.ContractBackfill.WithLabelValues(contract).Set(float64(left))
}
