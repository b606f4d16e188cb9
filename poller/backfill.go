package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// BackfillConfig is one backfill run over [From, To].
type BackfillConfig struct {
	// ID is the backfill's own cursor row; see BackfillID.
	ID   string
	From uint64
	// To is the last block, or -1 for the finality target at start.
	To int64
	// Chunk is the most blocks per transaction. Zero means as the live loop
	// catches up: ranges of MaxBlockRange (or what the node allows), the
	// next fetched while the current one is inserted, for as long as the
	// batch budget (min(TxTimeout/4, 2s)) lasts.
	Chunk uint64
	// Restart starts over from From instead of resuming.
	Restart bool
	// MaxAttempts is how many times in a row a chunk may fail before the
	// backfill gives up; zero means 8.
	MaxAttempts int
	// Progress, if set, is called after every committed chunk.
	Progress func(BackfillProgress)
}

// BackfillProgress is where a backfill stands.
type BackfillProgress struct {
	CursorID   string  `json:"cursor_id"`
	From       uint64  `json:"from"`
	To         int64   `json:"to"`
	Done       int64   `json:"blocks_done"`
	Total      int64   `json:"blocks_total"`
	Logs       int64   `json:"logs"`
	Inserted   int64   `json:"inserted"`
	Duplicates int64   `json:"duplicates"`
	Rejected   int64   `json:"rejected"`
	Elapsed    float64 `json:"elapsed_seconds"`
	Complete   bool    `json:"complete"`
	// Resumed is true when the run continued an earlier one's cursor;
	// DoneBefore is how many blocks the earlier runs did.
	Resumed    bool  `json:"resumed"`
	DoneBefore int64 `json:"blocks_done_before"`
}

var (
	// ErrInterrupted means the backfill stopped on request after its
	// current chunk committed or rolled back.
	ErrInterrupted = errors.New("backfill interrupted")
	// ErrBackfillBusy means another backfill of the same range holds its cursor.
	ErrBackfillBusy = errors.New("another backfill of this range is running")
	// ErrNotFinal means the range ends beyond the finality target.
	ErrNotFinal = errors.New("range ends beyond the finality target")
)

// BackfillID is the cursor row of a backfill of [from, to] for the poller
// group group: the same arguments resume the same backfill.
func BackfillID(group string, from uint64, to string) string {
	return "backfill:" + group + ":" + strconv.FormatUint(from, 10) + "-" + to
}

// Backfill records every burn in [From, To] through the same validation and
// idempotent insert as the live loop, one transaction per chunk, on its own
// cursor row: it never touches the live cursor, so it is safe beside running
// replicas, and a restart with the same arguments continues where it
// stopped. Cancelling ctx stops it after the current chunk commits or rolls
// back, with ErrInterrupted. The progress it returns is final.
func (p *Poller) Backfill(ctx context.Context, cfg BackfillConfig) (BackfillProgress, error) {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	start := time.Now()
	prog := BackfillProgress{CursorID: cfg.ID, From: cfg.From, To: cfg.To}

	// A chunk in flight may finish after ctx ends, within its own timeout.
	hard := context.WithoutCancel(ctx)
	target, err := p.node.Target(ctx)
	if err != nil {
		return prog, fmt.Errorf("reading the target: %w", err)
	}
	if cfg.To < 0 {
		cfg.To = target.Block
		prog.To = cfg.To
	}
	if cfg.To > target.Block {
		return prog, fmt.Errorf("%w: block %d, target %d", ErrNotFinal, cfg.To, target.Block)
	}
	if int64(cfg.From) > cfg.To {
		return prog, fmt.Errorf("empty range: from %d is after to %d", cfg.From, cfg.To)
	}
	prog.Total = cfg.To - int64(cfg.From) + 1

	cur, err := p.store.SeedCursor(ctx, cfg.ID, int64(cfg.From)-1)
	if err != nil {
		return prog, err
	}
	if cfg.Restart && cur.Block != int64(cfg.From)-1 {
		if err := p.setCursor(ctx, cfg.ID, int64(cfg.From)-1); err != nil {
			return prog, err
		}
		cur.Block = int64(cfg.From) - 1
		p.log.Info("backfill restarted from the beginning", slog.String("cursor_id", cfg.ID))
	}
	prog.Resumed = cur.Block >= int64(cfg.From)
	if prog.Resumed {
		p.log.Info("resuming backfill", slog.String("cursor_id", cfg.ID), slog.Int64("cursor", cur.Block))
	}
	prog.Done = max(min(cur.Block, cfg.To)-int64(cfg.From)+1, 0)
	prog.DoneBefore = prog.Done

	b := p.newBackoff()
	failures := 0
	for {
		prog.Elapsed = time.Since(start).Seconds()
		if prog.Done >= prog.Total {
			prog.Complete = true
			return prog, nil
		}
		if ctx.Err() != nil {
			return prog, ErrInterrupted
		}
		res, err := p.backfillChunk(ctx, hard, cfg)
		if err == nil {
			failures = 0
			b.Reset()
			prog.Done = res.to - int64(cfg.From) + 1
			prog.Logs += int64(res.logs)
			prog.Inserted += res.inserted
			prog.Duplicates += res.dups
			prog.Rejected += int64(res.rejected)
			prog.Elapsed = time.Since(start).Seconds()
			if cfg.Progress != nil {
				cfg.Progress(prog)
			}
			continue
		}
		if ctx.Err() != nil {
			return prog, ErrInterrupted
		}
		if errors.Is(err, ErrBackfillBusy) || errors.Is(err, ErrFinalityViolation) {
			return prog, err
		}
		failures++
		if failures >= cfg.MaxAttempts {
			return prog, fmt.Errorf("giving up after %d failed attempts: %w", failures, err)
		}
		wait := p.retryWait(b, err)
		p.log.Error("backfill chunk failed; rolled back, retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
		p.sleep(ctx, wait)
	}
}

// backfillChunk commits the next chunk of the backfill in its own
// transaction, under the backfill cursor's lock.
func (p *Poller) backfillChunk(stop, hard context.Context, cfg BackfillConfig) (rangeResult, error) {
	ctx, cancel := context.WithTimeout(hard, p.cfg.TxTimeout)
	defer cancel()
	tx, cur, err := p.begin(stop, ctx, cfg.ID)
	if tx != nil {
		defer tx.Rollback()
	}
	if errors.Is(err, payments.ErrLockTimeout) {
		return rangeResult{}, fmt.Errorf("%w (cursor %q)", ErrBackfillBusy, cfg.ID)
	}
	if err != nil {
		return rangeResult{}, err
	}
	end, ok := cfg.To, cur.Block < cfg.To
	if cfg.Chunk > 0 {
		_, end, ok = NextRange(cur.Block, cfg.To, cfg.Chunk)
	}
	if !ok {
		return rangeResult{from: cur.Block + 1, to: cur.Block}, tx.Commit(ctx)
	}
	res, err := p.advanceMany(ctx, tx, cur, end)
	if err != nil {
		return rangeResult{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return rangeResult{}, err
	}
	p.committed(res)
	return res, nil
}

// setCursor moves cursor id to block under its lock, as a reset does.
func (p *Poller) setCursor(ctx context.Context, id string, block int64) error {
	tx, err := p.store.Begin(ctx, payments.Limits{LockWait: p.cfg.LockWait, TxTimeout: p.cfg.TxTimeout})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.LockCursor(ctx, id); err != nil {
		if errors.Is(err, payments.ErrLockTimeout) {
			return fmt.Errorf("%w (cursor %q)", ErrBackfillBusy, id)
		}
		return err
	}
	if err := tx.SetCursor(ctx, id, block, ""); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
