package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// Idle is the RPC calls of caught-up replicas while blocks arrive and no
// burn does.
type Idle struct {
	Replicas      int     `json:"replicas"`
	NewHeads      bool    `json:"newheads_subscription"`
	Seconds       float64 `json:"seconds"`
	BlockTimeS    float64 `json:"block_time_seconds"`
	Blocks        uint64  `json:"blocks"`
	Calls         float64 `json:"calls"`
	CallsPerHour  float64 `json:"calls_per_hour"`
	CallsPerBlock float64 `json:"calls_per_block"`
	// PerHourByMethod is calls per hour, by JSON-RPC method.
	PerHourByMethod map[string]float64 `json:"calls_per_hour_by_method"`
}

// idlePhase counts the RPC calls of 1 and 3 replicas, polling and with
// RPC_WS_URL, while caught up on the dev chain: o.idle each, a block every
// o.idleBlockTime, no burns, every setting at its default.
func (b *bench) idlePhase(ctx context.Context, o options) ([]*Idle, error) {
	if o.idle <= 0 {
		return nil, nil
	}
	var out []*Idle
	for _, n := range []int{1, 3} {
		for _, ws := range []bool{false, true} {
			r, err := b.idleRun(ctx, o, n, ws)
			if err != nil {
				return nil, fmt.Errorf("idle, %d replicas, newHeads %v: %w", n, ws, err)
			}
			b.log.Info("idle", slog.Int("replicas", n), slog.Bool("newheads", ws), slog.Float64("calls_per_hour", r.CallsPerHour),
				slog.Float64("calls_per_block", r.CallsPerBlock), slog.Any("per_hour_by_method", r.PerHourByMethod))
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *bench) idleRun(ctx context.Context, o options, n int, ws bool) (*Idle, error) {
	run, err := b.liveRun(ctx, "bench_idle", ws)
	if err != nil {
		return nil, err
	}
	defer run.done()
	replicas, err := b.startReplicas(n, run.dbURL, run.logDir, "idle", run.env...)
	if err != nil {
		return nil, err
	}
	defer replicas.stop()
	sealCtx, stopSealing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopSealing(); wg.Wait() }()
	wg.Go(func() { each(sealCtx, o.idleBlockTime, func() { b.chain.Seal() }) })
	// Caught up: every replica has completed a poll (the holder: committed
	// or idle) or found the lock held (a standby), and the start-up calls
	// are behind.
	if err := harness.WaitFor(ctx, time.Minute, "every replica polling", func() bool { return allPolled(ctx, replicas) }); err != nil {
		return nil, err
	}
	time.Sleep(2 * o.idleBlockTime)
	count := func() (map[string]float64, uint64, error) {
		m, err := rpcCalls(ctx, replicas)
		if err != nil {
			return nil, 0, err
		}
		h, err := b.chain.Client().BlockNumber(ctx)
		return m, h, err
	}
	before, fromBlock, err := count()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	time.Sleep(o.idle)
	after, toBlock, err := count()
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	r := &Idle{Replicas: n, NewHeads: ws, Seconds: took.Seconds(), BlockTimeS: o.idleBlockTime.Seconds(),
		Blocks: toBlock - fromBlock, PerHourByMethod: map[string]float64{}}
	perHour := time.Hour.Seconds() / took.Seconds()
	for method := range after {
		if d := after[method] - before[method]; d > 0 {
			r.Calls += d
			r.PerHourByMethod[method] = d * perHour
		}
	}
	r.CallsPerHour = r.Calls * perHour
	if r.Blocks > 0 {
		r.CallsPerBlock = r.Calls / float64(r.Blocks)
	}
	return r, nil
}
