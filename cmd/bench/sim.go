package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"
)

// simRun is `make bench`: every phase on the sim chain, in this process. It
// seeds the dense workload, reads the ceilings, times catch-up with 1 and
// 3 replicas, the backfill command and failover under load, then the
// cross-checks, the steady state, head to seen, idle calls and the sparse
// first sync.
func (b *bench) simRun(ctx context.Context, o options, res *Results) error {
	c, log := b.chain, b.log
	log.Info("seeding", slog.Int("burns", o.burns))
	seedStart := time.Now()
	head, err := seed(ctx, c, o)
	if err != nil {
		return fmt.Errorf("seeding: %w", err)
	}
	res.SeedSeconds = time.Since(seedStart).Seconds()
	res.Blocks = head
	target, err := finalized(ctx, b.info.RPCURL)
	if err != nil {
		return err
	}
	log.Info("seeded", slog.Uint64("head", head), slog.Uint64("finalized", target), slog.Float64("seconds", res.SeedSeconds))

	if err := b.simCeilings(ctx, o, target, res); err != nil {
		return err
	}
	if err := b.simCatchUps(ctx, o, target, res); err != nil {
		return err
	}
	if o.trust {
		if err := b.trustPhases(ctx, target, o, res); err != nil {
			return err
		}
	}

	if o.steady > 0 {
		st, err := b.steady(ctx, o, false)
		if err != nil {
			return fmt.Errorf("steady state: %w", err)
		}
		res.Steady = st
		if st, err = b.steady(ctx, o, true); err != nil {
			return fmt.Errorf("steady state with newHeads: %w", err)
		}
		res.SteadyWS = st
	}
	if err := b.seenPhases(ctx, o, res); err != nil {
		return err
	}
	if res.Idle, err = b.idlePhase(ctx, o); err != nil {
		return err
	}
	if o.sparse {
		if res.SparseFloor, res.Sparse, err = b.sparsePhase(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// simCeilings reads the ceilings of the sim run up to target without
// burnpoller's writer: the node (through the poller's own chunking, and
// raw), its receipts, COPY, and node and Postgres together.
func (b *bench) simCeilings(ctx context.Context, o options, target uint64, res *Results) error {
	log := b.log
	// Ceiling (a): the node, with the poller's own chunking.
	rows, blocks, nodeRate, err := nodeCeiling(ctx, b.info, target)
	if err != nil {
		return fmt.Errorf("node ceiling: %w", err)
	}
	if len(rows) != o.burns {
		return fmt.Errorf("the node returned %d burns, %d were sent", len(rows), o.burns)
	}
	res.NodeCeiling = nodeRate
	if res.RawNodeCeiling, err = rawNodeCeiling(ctx, b.info.RPCURL, b.info.BurnContract, target); err != nil {
		return fmt.Errorf("raw node ceiling: %w", err)
	}
	log.Info("raw node ceiling", slog.Float64("burns_per_second", res.RawNodeCeiling.PerSec), slog.Int("calls", res.RawNodeCeiling.Calls))
	log.Info("node ceiling", slog.Float64("burns_per_second", nodeRate.PerSec), slog.Int("calls", nodeRate.Calls))
	if res.ReceiptsCeiling, err = receiptsCeiling(ctx, b.info.RPCURL, blocks, len(rows)); err != nil {
		return fmt.Errorf("receipts ceiling: %w", err)
	}
	log.Info("receipts ceiling", slog.Float64("burns_per_second", res.ReceiptsCeiling.PerSec), slog.Int("batches", res.ReceiptsCeiling.Calls))

	// Ceiling (b): Postgres, COPY into the real payments table.
	pgRate, err := pgCeiling(ctx, o.database, rows)
	if err != nil {
		return fmt.Errorf("postgres ceiling: %w", err)
	}
	res.PGCeiling = pgRate
	runtime.GC()
	log.Info("postgres ceiling", slog.Float64("rows_per_second", pgRate.PerSec))
	shared, err := sharedCeiling(ctx, o.database, b.info, target)
	if err != nil {
		return fmt.Errorf("shared ceiling: %w", err)
	}
	res.SharedCeiling = shared
	log.Info("node and postgres together", slog.Float64("per_second", shared.PerSec))
	return nil
}

// simCatchUps times catch-up with 1 and 3 replicas against the ceilings,
// the backfill command, and failover under load.
func (b *bench) simCatchUps(ctx context.Context, o options, target uint64, res *Results) error {
	log := b.log
	res.Settings = []string{"all defaults (MAX_BLOCK_RANGE=2000, FINALITY=finalized)", "POLL_INTERVAL=200ms for catch-up"}
	ceiling := min(res.NodeCeiling.PerSec, res.PGCeiling.PerSec)
	shared, pgRate := res.SharedCeiling, res.PGCeiling
	for _, n := range []int{1, 3} {
		cu, err := b.fullCatchUp(ctx, target, n, o.burns, fmt.Sprintf("catch-up with %d replicas", n))
		if err != nil {
			return err
		}
		cu.RatioToCeiling = cu.BurnsPerSec / ceiling
		cu.RatioToShared = cu.BurnsPerSec / shared.PerSec
		cu.RatioToRawNode = cu.BurnsPerSec / res.RawNodeCeiling.PerSec
		cu.RatioToCopy = cu.BurnsPerSec / pgRate.PerSec
		cu.RatioToRawSum = cu.BurnsPerSec * (1/res.RawNodeCeiling.PerSec + 1/pgRate.PerSec)
		if n == 1 {
			res.CatchUp1 = cu
		} else {
			res.CatchUp3 = cu
		}
		log.Info("catch-up", slog.Int("replicas", n), slog.Float64("burns_per_second", cu.BurnsPerSec),
			slog.Float64("ratio", cu.RatioToCeiling), slog.Any("rss_mib", cu.PeakRSSMiB))
	}
	bf, err := b.backfill(ctx)
	if err != nil {
		return fmt.Errorf("backfill: %w", err)
	}
	res.Backfill = bf
	log.Info("backfill command", slog.Float64("burns_per_second", bf.BurnsPerSec), slog.Int64("rss_mib", bf.PeakRSSMiB))
	fo, err := b.catchUp(ctx, target, 3, true)
	if err != nil {
		return fmt.Errorf("failover under load: %w", err)
	}
	res.FailoverBusyMs = fo.FailoverMs
	log.Info("failover under load", slog.Float64("ms", fo.FailoverMs))
	if res.CatchUp1.GetLogsCalls > 0 {
		res.GetLogsRatio31 = res.CatchUp3.GetLogsCalls / res.CatchUp1.GetLogsCalls
	}

	return nil
}

// seenPhases measures head-to-seen latency by polling, then with newHeads.
func (b *bench) seenPhases(ctx context.Context, o options, res *Results) error {
	if o.seen <= 0 {
		return nil
	}
	for _, ws := range []bool{false, true} {
		s, err := b.seenLatency(ctx, o, ws)
		if err != nil {
			return fmt.Errorf("head to seen (newHeads %v): %w", ws, err)
		}
		b.log.Info("head to seen", slog.Bool("newheads", ws), slog.Float64("p50_ms", s.P50Ms), slog.Float64("p99_ms", s.P99Ms))
		res.Seen = append(res.Seen, s)
	}
	return nil
}
