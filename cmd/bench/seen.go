package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
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
	dbName := "bench_seen"
	var env []string
	if ws {
		dbName += "_ws"
		env = append(env, "RPC_WS_URL="+b.info.WSURL)
	}
	dbURL, err := freshDB(ctx, b.admin, dbName)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, b.admin, dbName)
	head, err := b.chain.Client().BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	env = append(env, "START_BLOCK="+strconv.FormatUint(head+1, 10))
	logDir, err := os.MkdirTemp("", "bench-seen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	r, err := b.startReplica(dbURL, logDir, "seen", env...)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	listen, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer listen.Close(ctx)
	if err := harness.WaitFor(ctx, time.Minute, "LISTEN burnpoller_events", func() bool {
		_, err := listen.Exec(ctx, "LISTEN burnpoller_events")
		return err == nil
	}); err != nil {
		return nil, err
	}
	reader, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer reader.Close(ctx)

	var (
		mu      sync.Mutex
		sealed  = map[int64]time.Time{}
		arrived []struct {
			block int64
			at    time.Time
		}
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	// Seal, noting when each block became the head.
	wg.Go(func() {
		t := time.NewTicker(o.blockTime)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
			}
			b.chain.Seal()
			at := time.Now()
			n, err := b.chain.Client().BlockNumber(runCtx)
			if err != nil {
				continue
			}
			mu.Lock()
			sealed[int64(n)] = at
			mu.Unlock()
		}
	})
	wg.Go(func() { b.chain.Traffic(runCtx, o.steadyRate, nil) })
	// Read the events by seq on each notification; note each seen one.
	wg.Go(func() {
		var last int64
		for {
			if _, err := listen.WaitForNotification(runCtx); err != nil {
				return
			}
			at := time.Now()
			rows, err := reader.Query(runCtx, `SELECT seq, kind, block_number FROM payment_events WHERE seq > $1 ORDER BY seq`, last)
			if err != nil {
				return
			}
			for rows.Next() {
				var (
					seq, block int64
					kind       string
				)
				if rows.Scan(&seq, &kind, &block) != nil {
					continue
				}
				last = seq
				if kind == "seen" {
					mu.Lock()
					arrived = append(arrived, struct {
						block int64
						at    time.Time
					}{block, at})
					mu.Unlock()
				}
			}
			rows.Close()
		}
	})
	b.log.Info("head to seen", slog.Duration("for", o.seen), slog.Bool("newheads", ws))
	time.Sleep(o.seen)
	stop()
	wg.Wait()

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
	res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)*99/100], lat[len(lat)-1]
	return res, nil
}
