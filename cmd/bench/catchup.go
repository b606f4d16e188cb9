package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// catchUp times n replicas from an empty ledger, migrated, to target.
//
// With kill, the busy lock holder is SIGKILLed once a quarter of the range is
// done; catchUp returns as soon as another replica holds the lock, with the
// time that took in FailoverMs and nothing else measured.
func (b *bench) catchUp(ctx context.Context, target uint64, n int, kill bool, extra ...string) (CatchUp, error) {
	name := fmt.Sprintf("bench_catchup_%d_%v_%d", n, kill, len(extra))
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return CatchUp{}, err
	}
	defer dropDB(ctx, b.admin, name)
	if err := b.migrate(ctx, dbURL); err != nil {
		return CatchUp{}, err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return CatchUp{}, err
	}
	defer conn.Close(ctx)
	logDir, err := os.MkdirTemp("", "bench-logs-")
	if err != nil {
		return CatchUp{}, err
	}
	nodeCPU := -1.0
	if b.node != nil {
		nodeCPU = harness.CPUSeconds(b.node.proc.Pid())
	}
	start := time.Now()
	var replicas []*replica
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	for i := range n {
		r, err := b.startReplica(dbURL, logDir, fmt.Sprintf("catchup-%d-%d", n, i), append([]string{"POLL_INTERVAL=200ms"}, extra...)...)
		if err != nil {
			return CatchUp{}, err
		}
		replicas = append(replicas, r)
	}
	deadline := time.Now().Add(30 * time.Minute)
	var firstCommit time.Duration
	for c := cursorOf(ctx, conn); c < int64(target); c = cursorOf(ctx, conn) {
		if c >= 0 && firstCommit == 0 {
			firstCommit = time.Since(start)
		}
		// A quarter of the way, with kill: SIGKILL the busy holder and time
		// the hand-over to a standby waiting on the lock.
		if kill && c >= int64(target)/4 {
			if holder := lockHolder(ctx, replicas); holder != nil {
				ms, err := failover(ctx, holder, replicas)
				if err != nil {
					return CatchUp{}, err
				}
				return CatchUp{Replicas: n, FailoverMs: ms}, nil
			}
		}
		if time.Now().After(deadline) {
			return CatchUp{}, fmt.Errorf("no catch-up within 30 minutes (logs in %s)", logDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cu := CatchUp{Replicas: n, Seconds: time.Since(start).Seconds(), FirstCommitSecs: firstCommit.Seconds(), PeakRSSMiB: map[string]int64{}}
	// Where the CPU went, read before anything stops: the replicas, the
	// node, the database's backends. Others' work on the machine stretches
	// the wall clock far more than these.
	cu.CPUSeconds = map[string]float64{"postgres_backends": backendsCPU(ctx, conn)}
	if b.node != nil && nodeCPU >= 0 {
		cu.CPUSeconds["node"] = harness.CPUSeconds(b.node.proc.Pid()) - nodeCPU
	}
	for i, r := range replicas {
		cu.CPUSeconds[fmt.Sprintf("replica-%d", i)] = harness.CPUSeconds(r.Pid())
	}
	for i, r := range replicas {
		cu.GetLogsCalls += metric(ctx, r.addr, `burnpoller_rpc_requests_total{method="eth_getLogs"`)
		cu.RPCCalls += metric(ctx, r.addr, `burnpoller_rpc_requests_total{`)
		cu.ReceiptCalls += metric(ctx, r.addr, `burnpoller_rpc_requests_total{method="eth_getBlockReceipts"`) +
			metric(ctx, r.addr, `burnpoller_rpc_requests_total{method="eth_getTransactionReceipt"`)
		cu.DuplicateInserts += metric(ctx, r.addr, "burnpoller_payments_duplicate_total")
		cu.PeakRSSMiB[fmt.Sprintf("replica-%d", i)] = peakRSSMiB(r.Proc)
	}
	if cu.CallsByMethod, err = rpcCalls(ctx, replicas); err != nil {
		return CatchUp{}, err
	}
	if cu.CallSecondsByMethod, err = sumBy(ctx, replicas, "burnpoller_rpc_duration_seconds_sum"); err != nil {
		return CatchUp{}, err
	}
	if cu.Rows, err = countPayments(ctx, conn); err != nil {
		return CatchUp{}, err
	}
	_ = os.RemoveAll(logDir)
	return cu, nil
}

// failover SIGKILLs holder and returns the milliseconds until another of
// replicas holds the lock. It scrapes without pause: the hand-over takes
// milliseconds.
func failover(ctx context.Context, holder *replica, replicas []*replica) (float64, error) {
	_ = holder.Signal(syscall.SIGKILL)
	at := time.Now()
	for time.Since(at) < time.Minute {
		for _, r := range replicas {
			if r != holder && metric(ctx, r.addr, "burnpoller_lock_held") == 1 {
				return float64(time.Since(at).Microseconds()) / 1000, nil
			}
		}
	}
	return 0, errors.New("no standby took the lock within a minute")
}

// cursorOf is the highest last_processed_block in block_cursors; -2 while
// there is none or it cannot be read.
func cursorOf(ctx context.Context, conn *pgx.Conn) int64 {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(last_processed_block), -2) FROM block_cursors`).Scan(&n); err != nil {
		return -2
	}
	return n
}
