package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	if err := migrate(ctx, b.bin, dbURL); err != nil {
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
	nodeCPU := b.nodeCPU()
	start := time.Now()
	replicas, err := b.startReplicas(n, dbURL, logDir, fmt.Sprintf("catchup-%d", n), append([]string{"POLL_INTERVAL=200ms"}, extra...)...)
	if err != nil {
		return CatchUp{}, err
	}
	defer replicas.stop()
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
	cu.CPUSeconds = b.serverCPU(ctx, conn, nodeCPU)
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

// fullCatchUp is catchUp of n replicas, checked: they recorded every one
// of burns. what names the run in errors.
func (b *bench) fullCatchUp(ctx context.Context, target uint64, n, burns int, what string, extra ...string) (CatchUp, error) {
	cu, err := b.catchUp(ctx, target, n, false, extra...)
	if err != nil {
		return CatchUp{}, fmt.Errorf("%s: %w", what, err)
	}
	if cu.Rows != burns {
		return CatchUp{}, fmt.Errorf("%s recorded %d rows, want %d", what, cu.Rows, burns)
	}
	cu.BurnsPerSec = float64(burns) / cu.Seconds
	return cu, nil
}

// timedCatchUp times one replica from an empty ledger to target with
// extra settings and checks every burn is recorded.
func (b *bench) timedCatchUp(ctx context.Context, target uint64, burns int, name string, extra ...string) (CatchUp, error) {
	cu, err := b.fullCatchUp(ctx, target, 1, burns, "catch-up, "+name, extra...)
	if err != nil {
		return CatchUp{}, err
	}
	b.log.Info("catch-up", slog.String("setting", name), slog.Float64("burns_per_second", cu.BurnsPerSec),
		slog.Any("calls", cu.CallsByMethod), slog.Any("rss_mib", cu.PeakRSSMiB))
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
