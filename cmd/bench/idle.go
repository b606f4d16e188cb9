package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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

// rpcCalls sums burnpoller_rpc_requests_total over replicas by method,
// every method and result.
func rpcCalls(ctx context.Context, replicas []*replica) (map[string]float64, error) {
	return sumBy(ctx, replicas, "burnpoller_rpc_requests_total")
}

// sumBy sums metric over replicas by its method label.
func sumBy(ctx context.Context, replicas []*replica, metric string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, r := range replicas {
		m, err := harness.ScrapeBy(ctx, r.addr, metric, "method")
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out, nil
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
	name := "bench_idle"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, b.admin, name)
	head, err := b.chain.Client().BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	env := []string{"START_BLOCK=" + strconv.FormatUint(head+1, 10)}
	if ws {
		env = append(env, "RPC_WS_URL="+b.info.WSURL)
	}
	logDir, err := os.MkdirTemp("", "bench-idle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	var replicas []*replica
	defer func() {
		for _, r := range replicas {
			r.stop()
		}
	}()
	for i := range n {
		r, err := b.startReplica(dbURL, logDir, fmt.Sprintf("idle-%d", i), env...)
		if err != nil {
			return nil, err
		}
		replicas = append(replicas, r)
	}
	sealCtx, stopSealing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopSealing(); wg.Wait() }()
	wg.Go(func() { b.seal(sealCtx, o.idleBlockTime) })
	// Caught up: every replica has completed a poll (the holder: committed
	// or idle) or found the lock held (a standby), and the start-up calls
	// are behind.
	if err := harness.WaitFor(ctx, time.Minute, "every replica polling", func() bool {
		for _, r := range replicas {
			if !polled(ctx, r) {
				return false
			}
		}
		return true
	}); err != nil {
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
