package poller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/payments"
)

// BackfillConfig is one backfill run over [From, To].
type BackfillConfig struct {
	// ID is the backfill's own cursor row; see BackfillID.
	ID   string
	From int64
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
	// MaxBackoff caps the wait after a failed chunk; zero means 30 seconds.
	MaxBackoff time.Duration
	// Progress, if set, is called after every committed chunk.
	Progress func(BackfillProgress)
}

// BackfillProgress is where a backfill stands.
type BackfillProgress struct {
	CursorID   string  `json:"cursor_id"`
	From       int64   `json:"from"`
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

// maxCursorID is the longest cursor id the ledger accepts.
const maxCursorID = 200

// BackfillID is the cursor row of a backfill of [from, to] of contracts in
// poller group group: the same arguments resume the same backfill, and other
// contracts make another backfill (resuming one that never read a contract
// added since would skip that contract's burns). It is
// "backfill:<group>:<from>-<to>" when the group's id names its one contract
// (the default CURSOR_ID), else "backfill:<group>+<contracts>:<from>-<to>",
// <contracts> 8 hex digits of the sorted contracts' sha256; when that is too
// long for a cursor id, as much of it as fits followed by a hash of the
// whole.
func BackfillID(group string, contracts []common.Address, from int64, to string) string {
	if len(contracts) != 1 || !strings.HasSuffix(group, ":"+lowerHex(contracts[0])) {
		set := lowerHexes(contracts)
		slices.Sort(set)
		sum := sha256.Sum256([]byte(strings.Join(set, ",")))
		group += "+" + hex.EncodeToString(sum[:4])
	}
	return backfillID(group, from, to)
}

func backfillID(group string, from int64, to string) string {
	id := "backfill:" + group + ":" + strconv.FormatInt(from, 10) + "-" + to
	if len(id) <= maxCursorID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return id[:maxCursorID-len(suffix)] + suffix
}

// Backfill records every burn in [From, To] through w, one range
// transaction per chunk, on its own cursor row: it never touches the live
// cursor, so it is safe beside running replicas, and a restart with the same
// arguments continues where it stopped. The cursor is seeded with block
// From-1's canonical hash and every chunk checks continuity and the ledger
// against the chain like the live loop, so a reorganisation under it is a
// *ViolationError, not a burn recorded twice. Cancelling ctx stops it after
// the current chunk commits or rolls back, with ErrInterrupted. The progress
// it returns is final.
func Backfill(ctx context.Context, w *Writer, cfg BackfillConfig) (BackfillProgress, error) {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	start := time.Now()
	defer w.ForgetAhead()
	prog, err := startBackfill(ctx, w, &cfg)
	if err != nil {
		return prog, err
	}
	// A chunk in flight may finish after ctx ends, within its own timeout.
	drain := context.WithoutCancel(ctx)
	b := newBackoff(cfg.MaxBackoff)
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
		res, err := backfillChunk(ctx, drain, w, cfg)
		if err == nil {
			failures = 0
			b.Reset()
			prog.add(res, cfg.From)
			prog.Elapsed = time.Since(start).Seconds()
			if cfg.Progress != nil {
				cfg.Progress(prog)
			}
			continue
		}
		if err := chunkFailed(ctx, w, err); err != nil {
			return prog, err
		}
		if NeedsHashes(err) {
			// Read outside the transaction what its check needs, and
			// go on at once.
			if err = w.FetchHashes(ctx, err); err == nil {
				continue
			}
		}
		failures++
		if failures >= cfg.MaxAttempts {
			return prog, fmt.Errorf("giving up after %d failed attempts: %w", failures, err)
		}
		wait := retryWait(b, err, cfg.MaxBackoff)
		w.log.Error("backfill chunk failed; rolled back, retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
		sleep(ctx, wait, nil)
	}
}

// startBackfill checks the range against the target (resolving To -1 in
// cfg), seeds or restarts the backfill's cursor, and returns where it
// stands.
func startBackfill(ctx context.Context, w *Writer, cfg *BackfillConfig) (BackfillProgress, error) {
	prog := BackfillProgress{CursorID: cfg.ID, From: cfg.From, To: cfg.To}
	target, err := w.node.Target(ctx)
	if err != nil {
		return prog, interrupted(ctx, fmt.Errorf("reading the target: %w", err))
	}
	if cfg.To < 0 {
		cfg.To = target.Block
		prog.To = cfg.To
	}
	if cfg.To > target.Block {
		return prog, fmt.Errorf("%w: block %d, target %d", ErrNotFinal, cfg.To, target.Block)
	}
	if cfg.From > cfg.To {
		return prog, fmt.Errorf("empty range: from %d is after to %d", cfg.From, cfg.To)
	}
	prog.Total = cfg.To - cfg.From + 1

	cur, err := w.Seed(ctx, cfg.ID, cfg.From-1)
	if err != nil {
		return prog, interrupted(ctx, err)
	}
	if cfg.Restart {
		res, err := w.Reset(ctx, cfg.ID, cfg.From-1, ResetOptions{})
		if errors.Is(err, ErrCursorLocked) {
			return prog, fmt.Errorf("%w (cursor %q)", ErrBackfillBusy, cfg.ID)
		}
		if err != nil {
			return prog, interrupted(ctx, fmt.Errorf("restarting backfill %q: %w", cfg.ID, err))
		}
		cur.Block, cur.Hash = res.To, res.Hash
		w.log.Info("backfill restarted from the beginning", slog.String("cursor_id", cfg.ID))
	}
	prog.Resumed = cur.Block >= cfg.From
	if prog.Resumed {
		w.log.Info("resuming backfill", slog.String("cursor_id", cfg.ID), slog.Int64("cursor", cur.Block))
	}
	prog.Done = max(min(cur.Block, cfg.To)-cfg.From+1, 0)
	prog.DoneBefore = prog.Done
	return prog, nil
}

// add counts a committed chunk.
func (p *BackfillProgress) add(res Totals, from int64) {
	p.Done = res.To - from + 1
	p.Logs += int64(res.Logs)
	p.Inserted += res.Inserted
	p.Duplicates += res.Duplicates
	p.Rejected += int64(res.Rejected)
}

// chunkFailed returns the error that ends the backfill for a chunk's
// failure err (nil when the chunk is to be tried again): a stop, a finality
// violation (logged), another backfill holding the cursor, or a hook the
// contract does not agree on.
func chunkFailed(ctx context.Context, w *Writer, err error) error {
	if ctx.Err() != nil {
		return ErrInterrupted
	}
	var v *ViolationError
	if errors.As(err, &v) {
		LogViolation(ctx, w.log, v)
		return err
	}
	if errors.Is(err, ErrBackfillBusy) || errors.Is(err, payments.ErrHookMismatch) {
		return err
	}
	return nil
}

// interrupted is err, or ErrInterrupted when ctx ended (the error is then
// the cancellation's, not a fault).
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w before the first chunk: %w", ErrInterrupted, err)
	}
	return err
}

// backfillChunk commits the next chunk of the backfill in its own range
// transaction, under the backfill cursor's lock.
func backfillChunk(stop, drain context.Context, w *Writer, cfg BackfillConfig) (Totals, error) {
	ctx, cancel := context.WithTimeout(drain, w.cfg.TxTimeout)
	defer cancel()
	tx, err := w.Begin(stop, ctx, cfg.ID)
	if errors.Is(err, payments.ErrLockTimeout) {
		return Totals{}, fmt.Errorf("%w (cursor %q)", ErrBackfillBusy, cfg.ID)
	}
	if err != nil {
		return Totals{}, err
	}
	defer tx.Rollback()
	cur := tx.Cursor()
	end := cfg.To
	if cfg.Chunk > 0 {
		if _, to, ok := NextRange(cur.Block, cfg.To, cfg.Chunk); ok {
			end = to
		}
	}
	if _, err := tx.Advance(ctx, end, w.BatchBudget()); err != nil {
		return Totals{}, err
	}
	return tx.Commit(ctx)
}
