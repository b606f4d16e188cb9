package main

import (
	"context"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
)

// steady runs three replicas at the default POLL_INTERVAL while burns
// arrive at a fixed rate, measures head-to-row latency (from the moment a
// block is within the finality target to the moment its payment's
// transaction commits, seen by LISTEN), and then the failover after SIGKILL
// of the lock holder. With ws the replicas also subscribe to newHeads.
func (b *bench) steady(ctx context.Context, o options, ws bool) (*Steady, error) {
	// Started at the current head: the steady state, not a catch-up.
	run, err := b.liveRun(ctx, "bench_steady", ws)
	if err != nil {
		return nil, err
	}
	defer run.done()
	const pollInterval = "2s"
	replicas, err := b.startReplicas(3, run.dbURL, run.logDir, "steady", run.env...)
	if err != nil {
		return nil, err
	}
	defer replicas.stop()
	// The replicas create the schema: LISTEN works once they have.
	payments, err := listen(ctx, run.dbURL, "burnpoller_payments")
	if err != nil {
		return nil, err
	}
	defer payments.Close(ctx)
	reader, err := pgx.Connect(ctx, run.dbURL)
	if err != nil {
		return nil, err
	}
	defer reader.Close(ctx)
	cl, err := chain.Dial(ctx, b.info.RPCURL, chain.Options{})
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg     sync.WaitGroup
		clock  finalityClock
		landed arrivals
	)
	wg.Go(func() { each(runCtx, o.blockTime, func() { b.chain.Seal() }) })
	wg.Go(func() { clock.watch(runCtx, cl) })
	wg.Go(func() { b.chain.Traffic(runCtx, o.steadyRate, nil) })
	wg.Go(func() { landed.listen(runCtx, payments, reader) })

	b.log.Info("steady state", slog.Duration("for", o.steady), slog.Float64("rate", o.steadyRate), slog.Bool("newheads", ws))
	time.Sleep(o.steady)
	failover := steadyFailover(ctx, replicas)
	stop()
	wg.Wait()

	st := &Steady{Seconds: o.steady.Seconds(), Rate: o.steadyRate, PollInterval: pollInterval, FailoverMs: failover, NewHeads: ws}
	headToRow(st, &clock, &landed)
	for _, r := range replicas {
		st.DuplicateInserts += metric(ctx, r.addr, "burnpoller_payments_duplicate_total")
		st.GetLogsCalls += metric(ctx, r.addr, `burnpoller_rpc_requests_total{method="eth_getLogs"`)
	}
	return st, nil
}

// steadyFailover SIGKILLs the lock holder, caught by scraping lock_held, and
// returns the milliseconds until another replica holds the lock or
// completes a poll. The scraping runs without pause. It gives up after two
// minutes with -1.
func steadyFailover(ctx context.Context, replicas replicaSet) float64 {
	polls := func(r *replica) float64 {
		return metric(ctx, r.addr, `burnpoller_polls_total{result="committed"}`) + metric(ctx, r.addr, `burnpoller_polls_total{result="idle"}`)
	}
	for caught := time.Now().Add(2 * time.Minute); time.Now().Before(caught); {
		holder := lockHolder(ctx, replicas)
		if holder == nil {
			continue
		}
		_ = holder.Signal(syscall.SIGKILL)
		killed := time.Now()
		var others []*replica
		base := map[*replica]float64{}
		for _, r := range replicas {
			if r != holder {
				others = append(others, r)
				base[r] = polls(r)
			}
		}
		for time.Since(killed) < 30*time.Second {
			for _, r := range others {
				held := metric(ctx, r.addr, "burnpoller_lock_held") == 1
				if held || polls(r) > base[r] {
					return float64(time.Since(killed).Microseconds()) / 1000
				}
			}
		}
		// No hand-over within 30 s: catch the next holder while the two
		// minutes last.
	}
	return -1
}
