package main

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
)

// Results is everything the bench measured.
type Results struct {
	Machine string `json:"machine"`
	// Node is the node of the dense workload of the sim run (sim: the
	// in-process simulated backend); the real-node runs name theirs.
	Node        string  `json:"node,omitempty"`
	Burns       int     `json:"burns"`
	Blocks      uint64  `json:"blocks"`
	SeedSeconds float64 `json:"seed_seconds"`
	NodeCeiling Rate    `json:"node_ceiling"`
	PGCeiling   Rate    `json:"postgres_ceiling"`
	// RawNodeCeiling is the node alone: eth_getLogs over the whole range in
	// as few calls as it accepts, through a plain HTTP client, undecoded.
	RawNodeCeiling Rate `json:"raw_node_ceiling"`
	// ReceiptsCeiling is the node serving the receipts of every block
	// holding a burn (raw eth_getBlockReceipts, not decoded).
	ReceiptsCeiling Rate `json:"receipts_ceiling"`
	// SharedCeiling is node and Postgres together on this machine: fetch
	// and COPY pipelined, no burnpoller (they share the same cores).
	SharedCeiling  Rate     `json:"node_and_postgres_together"`
	CatchUp1       CatchUp  `json:"catch_up_1_replica"`
	CatchUp3       CatchUp  `json:"catch_up_3_replicas"`
	Steady         *Steady  `json:"steady_state,omitempty"`
	SteadyWS       *Steady  `json:"steady_state_with_newheads,omitempty"`
	Settings       []string `json:"poller_settings"`
	GetLogsRatio31 float64  `json:"getlogs_calls_3_vs_1"`
	// Backfill is `poller backfill --from 0 --to finalized`, one process.
	Backfill Backfill `json:"backfill_command"`
	// FailoverBusyMs: three replicas catching up; the busy lock holder is
	// SIGKILLed; the time until a standby, waiting on the lock, holds it.
	FailoverBusyMs float64 `json:"failover_under_load_ms"`
	// Trust is catch-up with one replica with each of the cross-checks on
	// and off: what receipts and a quorum cost.
	Trust []TrustRun `json:"trust_checks,omitempty"`
	// Sparse is the first syncs of a sparse chain through a provider-like
	// proxy, -sparse-runs per setting on one seeded chain (-sparse,
	// -sparse-only).
	Sparse []*Sparse `json:"sparse_first_sync,omitempty"`
	// SparseFloor is the sparse chain read without burnpoller.
	SparseFloor *SparseFloor `json:"sparse_floor,omitempty"`
	// Idle is RPC calls while caught up and no burn arrives (-idle).
	Idle []*Idle `json:"idle_rpc_calls,omitempty"`
	// Upgrade is a ledger of real size migrated while replicas record
	// (-upgrade-only).
	Upgrade *Upgrade `json:"upgrade,omitempty"`
	// Still is what a head standing still costs (-still-only).
	Still *Still `json:"still_head,omitempty"`
	// Seen is head-to-seen latency, polling and with newHeads.
	Seen []*Seen `json:"head_to_seen,omitempty"`
	// Dense is the dense runs on real nodes (-dense-node geth, anvil).
	Dense []*Dense `json:"dense_real_node,omitempty"`
	// Groups is the many-groups phase (-groups-only).
	Groups *Groups `json:"groups,omitempty"`
	// Cost is what following live chains costs at the provider
	// (-cost-only).
	Cost []*Cost `json:"cost,omitempty"`
	// MultiGroup is the many-chains phase (-multigroup-only).
	MultiGroup *MultiGroup `json:"many_chains_one_deployment,omitempty"`
}

// Rate is a count over a time.
type Rate struct {
	Items   int     `json:"items"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_second"`
	Calls   int     `json:"calls,omitempty"`
}

// CatchUp is one catch-up run.
type CatchUp struct {
	Replicas       int     `json:"replicas"`
	Seconds        float64 `json:"seconds"`
	BurnsPerSec    float64 `json:"burns_per_second"`
	RatioToCeiling float64 `json:"ratio_to_min_ceiling"`
	RatioToShared  float64 `json:"ratio_to_node_and_postgres_together"`
	// The ratios to the honest ceilings: the raw node alone, COPY alone,
	// and the two one after the other (1 / (1/raw + 1/COPY)).
	RatioToRawNode  float64 `json:"ratio_to_raw_node"`
	RatioToCopy     float64 `json:"ratio_to_copy"`
	RatioToRawSum   float64 `json:"ratio_to_raw_node_then_copy"`
	FirstCommitSecs float64 `json:"first_commit_seconds"`
	// FailoverMs: with three replicas, the busy lock holder is SIGKILLed
	// mid catch-up; the time until another replica commits a range.
	FailoverMs       float64          `json:"failover_after_sigkill_ms,omitempty"`
	GetLogsCalls     float64          `json:"eth_getLogs_calls"`
	ReceiptCalls     float64          `json:"receipt_calls"`
	RPCCalls         float64          `json:"rpc_calls"`
	DuplicateInserts float64          `json:"duplicate_insert_attempts"`
	PeakRSSMiB       map[string]int64 `json:"peak_rss_mib"`
	Rows             int              `json:"rows"`
	// CallsByMethod is the replicas' JSON-RPC calls by method; a batch
	// counts each call in it.
	CallsByMethod map[string]float64 `json:"calls_by_method,omitempty"`
	// CallSecondsByMethod is the time spent in those calls, summed: the
	// calls of one batch each count the batch's whole time.
	CallSecondsByMethod map[string]float64 `json:"call_seconds_by_method,omitempty"`
	// CPUSeconds is the CPU time each part used during the run: each
	// replica, the node (a real node only), the database's backends.
	CPUSeconds map[string]float64 `json:"cpu_seconds,omitempty"`
}

// Backfill is the one-shot backfill command over the whole range.
type Backfill struct {
	Seconds     float64 `json:"seconds"`
	BurnsPerSec float64 `json:"burns_per_second"`
	PeakRSSMiB  int64   `json:"peak_rss_mib"`
	Rows        int     `json:"rows"`
	ExitCode    int     `json:"exit_code"`
}

// Steady is the steady-state phase.
type Steady struct {
	Seconds          float64 `json:"seconds"`
	Rate             float64 `json:"burns_per_second_sent"`
	Payments         int     `json:"payments"`
	PollInterval     string  `json:"poll_interval"`
	LatencyP50Ms     float64 `json:"head_to_row_p50_ms"`
	LatencyP99Ms     float64 `json:"head_to_row_p99_ms"`
	LatencyMaxMs     float64 `json:"head_to_row_max_ms"`
	DuplicateInserts float64 `json:"duplicate_insert_attempts"`
	GetLogsCalls     float64 `json:"eth_getLogs_calls"`
	FailoverMs       float64 `json:"failover_after_sigkill_ms"`
	NewHeads         bool    `json:"newheads_subscription"`
}

// machine describes the CPUs, memory and Go of this machine.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.+)`).FindSubmatch(b); m != nil {
			cpu = string(m[1])
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
			mem = fmt.Sprintf(", %d GiB", kb>>20)
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// TrustRun is a one-replica catch-up under one setting of the cross-checks.
type TrustRun struct {
	Setting string `json:"setting"`
	CatchUp
	// RatioToDefault is this run's rate over the default's (receipts on,
	// no quorum).
	RatioToDefault float64 `json:"ratio_to_default"`
}
