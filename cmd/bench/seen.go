package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Seen is the head-to-seen latency of one replica: from the moment a block
// is sealed (it is the node's head from then on) to the moment its burn's
// `seen` event has committed, as a LISTEN on burnpoller_events and a read by
// seq observe it.
type Seen struct {
	Seconds      float64 `json:"seconds"`
	Rate         float64 `json:"burns_per_second_sent"`
	BlockTime    string  `json:"block_time"`
	PollInterval string  `json:"poll_interval"`
	NewHeads     bool    `json:"newheads_subscription"`
	Seen         int     `json:"seen_events"`
	P50Ms        float64 `json:"head_to_seen_p50_ms"`
	P90Ms        float64 `json:"head_to_seen_p90_ms"`
	P99Ms        float64 `json:"head_to_seen_p99_ms"`
	MaxMs        float64 `json:"head_to_seen_max_ms"`
}

// seenLatency runs one replica at the default POLL_INTERVAL (2s), with the
// newHeads subscription when ws, while burns arrive at o.steadyRate in
// blocks sealed every o.blockTime, for o.seen.
func (b *bench) seenLatency(ctx context.Context, o options, ws bool) (*Seen, error) {
	run, err := b.liveRun(ctx, "bench_seen", ws)
	if err != nil {
		return nil, err
	}
	defer run.done()
	r, err := b.startReplica(run.dbURL, run.logDir, "seen", run.env...)
	if err != nil {
		return nil, err
	}
	defer r.stop()

	var (
		mu      sync.Mutex
		sealed  = map[int64]time.Time{}
		arrived []arrival
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Note each seen event as it is read by seq.
	watching, err := watchEvents(runCtx, run.dbURL, func(e event, at time.Time) {
		if e.kind == "seen" {
			mu.Lock()
			arrived = append(arrived, arrival{e.block, at})
			mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	// Seal, noting when each block became the head.
	wg.Go(func() {
		each(runCtx, o.blockTime, func() {
			b.chain.Seal()
			at := time.Now()
			n, err := b.chain.Client().BlockNumber(runCtx)
			if err != nil {
				return
			}
			mu.Lock()
			sealed[int64(n)] = at
			mu.Unlock()
		})
	})
	wg.Go(func() { b.chain.Traffic(runCtx, o.steadyRate, nil) })
	b.log.Info("head to seen", slog.Duration("for", o.seen), slog.Bool("newheads", ws))
	time.Sleep(o.seen)
	stop()
	wg.Wait()
	watching()

	res := &Seen{Seconds: o.seen.Seconds(), Rate: o.steadyRate, BlockTime: o.blockTime.String(), PollInterval: "2s (default)", NewHeads: ws}
	var lat []float64
	mu.Lock()
	for _, a := range arrived {
		if at, ok := sealed[a.block]; ok {
			lat = append(lat, float64(a.at.Sub(at).Microseconds())/1000)
		}
	}
	mu.Unlock()
	if len(lat) == 0 {
		return nil, fmt.Errorf("no seen event arrived in %s", o.seen)
	}
	slices.Sort(lat)
	res.Seen = len(lat)
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), lat[len(lat)-1]
	return res, nil
}
