package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// backfill runs `poller backfill --from 0 --to finalized` on an empty
// ledger, sampling its peak resident memory until it exits.
func (b *bench) backfill(ctx context.Context) (Backfill, error) {
	dbURL, err := freshDB(ctx, b.admin, "bench_backfill")
	if err != nil {
		return Backfill{}, err
	}
	defer dropDB(ctx, b.admin, "bench_backfill")
	start := time.Now()
	p, err := harness.Start(harness.Spec{
		Name: "backfill", Bin: b.bin, Args: []string{"backfill", "--from", "0", "--to", "finalized"},
		Env: b.pollerEnv(dbURL, ""),
	})
	if err != nil {
		return Backfill{}, err
	}
	var peak int64
	for running := true; running; {
		select {
		case <-p.Done():
			running = false
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, peakRSSMiB(p))
		}
	}
	bf := Backfill{Seconds: time.Since(start).Seconds(), PeakRSSMiB: peak, ExitCode: p.ExitCode()}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return bf, err
	}
	defer conn.Close(ctx)
	if bf.Rows, err = countPayments(ctx, conn); err != nil {
		return bf, err
	}
	bf.BurnsPerSec = float64(bf.Rows) / bf.Seconds
	return bf, nil
}
