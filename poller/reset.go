package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

var (
	// ErrSkipRefused means a reset would move the cursor forward, skipping
	// the burns in between, and was not allowed to.
	ErrSkipRefused = errors.New("moving the cursor forward skips burns; pass --allow-skip if that is really meant")
	// ErrCursorLocked means a running writer holds the cursor's lock.
	ErrCursorLocked = errors.New("cursor is locked by a running replica")
	// ErrBeyondTarget means a block is beyond the finality target, so its
	// canonical hash is not final.
	ErrBeyondTarget = errors.New("block is beyond the finality target")
)

// ResetOptions are an operator's choices for a cursor reset.
type ResetOptions struct {
	// AllowSkip allows moving the cursor forward, which skips the burns in
	// between.
	AllowSkip bool
	// MarkOrphaned marks the group's payments above the new position whose
	// blocks are no longer on the canonical chain as orphaned (they stay in
	// the ledger): after a finality violation, the writers would otherwise
	// find them again and latch again.
	MarkOrphaned bool
	// Wait waits for the cursor's lock for as long as it takes instead of
	// refusing while a writer holds it.
	Wait bool
}

// ResetResult is what a reset did.
type ResetResult struct {
	// From is the cursor before the reset.
	From payments.Cursor
	// To and Hash are where it is now; Hash is block To's canonical hash
	// ("" for To = -1).
	To   int64
	Hash string
	// Orphaned are the payments marked orphaned.
	Orphaned []payments.Recorded
	// DBUser is the database role that made the reset.
	DBUser string
}

// Reset moves cursor id to block to, under its lock, with block to's
// canonical hash from the node so that the next range's continuity check
// holds. It refuses a block beyond the finality target, and moving forward
// unless opts.AllowSkip; with opts.MarkOrphaned it marks the payments above
// to whose blocks the chain no longer holds. Cursor resets and backfill
// restarts both go through it.
func (w *Writer) Reset(ctx context.Context, id string, to int64, opts ResetOptions) (ResetResult, error) {
	hash, final, err := w.finalHash(ctx, to)
	if err != nil {
		return ResetResult{}, err
	}
	if !final {
		return ResetResult{}, fmt.Errorf("%w: block %d", ErrBeyondTarget, to)
	}
	// Canonical hashes of the blocks above to that hold payments, read
	// before taking the lock so that the lock is held briefly.
	hashes := map[int64]string{}
	if opts.MarkOrphaned {
		blocks, err := w.store.PaymentBlocksAbove(ctx, w.cfg.ChainID, w.contracts(), to)
		if err != nil {
			return ResetResult{}, err
		}
		if err := w.canonicalHashes(ctx, blocks, hashes); err != nil {
			return ResetResult{}, err
		}
	}

	// Blocks recorded between that read and the lock need their hashes too:
	// the transaction rolls back, they are read with no lock held, and it
	// starts again (a live writer recording meanwhile can make that happen
	// more than once; each round reads only the blocks it recorded since).
	for attempt := 1; ; attempt++ {
		res, err := w.reset(ctx, id, to, hash, hashes, opts)
		var need *errNeedHashes
		switch {
		case err == nil:
			w.logOrphaned(res, hashes)
			return res, nil
		case !errors.As(err, &need):
			return ResetResult{}, err
		case attempt == resetAttempts:
			return ResetResult{}, fmt.Errorf("cursor %q: writers recorded new blocks above %d in each of %d attempts; retry: %w", id, to, attempt, err)
		}
		if err := w.canonicalHashes(ctx, need.blocks, hashes); err != nil {
			return ResetResult{}, err
		}
	}
}

// resetAttempts bounds the rounds of Reset that find blocks recorded since
// it read their hashes.
const resetAttempts = 5

// reset is one round of Reset, under the cursor's lock; it never waits on
// the node: blocks whose hashes are not in hashes are an errNeedHashes.
func (w *Writer) reset(ctx context.Context, id string, to int64, hash string, hashes map[int64]string, opts ResetOptions) (ResetResult, error) {
	// The work under the lock is bounded by a minute on the server whatever
	// the wait was: a reset that freezes or is cut off holding the cursor
	// lets go of it as a writer does.
	work := payments.Limits{LockWait: min(2*time.Second, w.cfg.LockWait), TxTimeout: time.Minute}
	wait := work
	if opts.Wait {
		wait = payments.Limits{LockWait: 24 * time.Hour, TxTimeout: 25 * time.Hour}
	}
	wctx, cancelWait := context.WithTimeout(ctx, wait.TxTimeout)
	defer cancelWait()
	t, err := w.begin(wctx, wctx, id, wait, resetRule)
	if errors.Is(err, payments.ErrLockTimeout) {
		return ResetResult{}, fmt.Errorf("cursor %q: %w; retry, or pass --wait: %w", id, ErrCursorLocked, err)
	}
	if err != nil {
		return ResetResult{}, err
	}
	defer t.Rollback()
	if err := t.use(); err != nil {
		return ResetResult{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, work.TxTimeout)
	defer cancel()
	if err := t.tx.SetLimits(tctx, work); err != nil {
		return ResetResult{}, err
	}
	cur := t.cur
	if to > cur.Block && !opts.AllowSkip {
		return ResetResult{}, fmt.Errorf("cursor %q is at %d, --to %d: %w", id, cur.Block, to, ErrSkipRefused)
	}
	res := ResetResult{From: cur, To: to, Hash: hash}
	if res.DBUser, err = t.tx.DatabaseUser(tctx); err != nil {
		return ResetResult{}, err
	}
	if opts.MarkOrphaned {
		if res.Orphaned, err = t.markOrphaned(tctx, to, hashes); err != nil {
			return ResetResult{}, err
		}
	}
	if err := t.tx.MoveCursor(tctx, id, cur.Block, to, hash); err != nil {
		return ResetResult{}, err
	}
	if _, err := t.Commit(tctx); err != nil {
		return ResetResult{}, err
	}
	return res, nil
}

// logOrphaned logs each payment a reset marked orphaned.
func (w *Writer) logOrphaned(res ResetResult, hashes map[int64]string) {
	for _, r := range res.Orphaned {
		w.log.Warn("payment marked orphaned: its block is no longer on the canonical chain",
			slog.Int64("id", r.ID), slog.String("tx", r.TxHash), slog.Uint64("log_index", uint64(r.LogIndex)),
			slog.Int64("block", r.BlockNumber), slog.String("block_hash", r.BlockHash),
			slog.String("chain_hash", hashes[r.BlockNumber]), slog.String("payer", r.Payer), slog.String("amount", r.Amount.String()))
	}
}

// markOrphaned marks the payments above block to whose blocks the chain
// no longer holds as orphaned, and retracts them: a payment of a dropped
// branch is retracted like a burn seen at the head, so consumers learn of
// it by the same events. hashes holds canonical hashes read before the
// lock; a block a writer recorded since, whose hash it lacks, is an
// errNeedHashes: the contract's writers are never held off while the node
// is asked.
func (t *RangeTx) markOrphaned(ctx context.Context, to int64, hashes map[int64]string) ([]payments.Recorded, error) {
	w := t.w
	if err := t.lockWriters(ctx); err != nil {
		return nil, err
	}
	blocks, err := t.tx.PaymentBlocksAbove(ctx, w.cfg.ChainID, w.contracts(), to)
	if err != nil {
		return nil, err
	}
	var missing []int64
	for _, b := range blocks {
		if _, ok := hashes[b]; !ok {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return nil, &errNeedHashes{blocks: missing}
	}
	known := make([]int64, 0, len(blocks))
	canon := make([]string, 0, len(blocks))
	for _, b := range blocks {
		known, canon = append(known, b), append(canon, hashes[b])
	}
	orphaned, err := t.tx.MarkOrphanedOffChain(ctx, w.cfg.ChainID, w.contracts(), to, known, canon)
	if err != nil {
		return nil, err
	}
	for _, r := range orphaned {
		t.retract(r.Payment, "")
	}
	return orphaned, nil
}

// hashBatch is how many blocks' headers one call asks for.
const hashBatch = 1000

// canonicalHashes fills hashes with the canonical hash of each block in
// blocks not yet in it. A block the node does not have fails it: the new
// branch may be shorter than the ledger for a while, and a lagging endpoint
// says the same; a payment is never marked orphaned on a missing answer.
func (w *Writer) canonicalHashes(ctx context.Context, blocks []int64, hashes map[int64]string) error {
	var need []uint64
	for _, n := range blocks {
		if _, ok := hashes[n]; !ok && n >= 0 {
			need = append(need, nodeBlock(n))
		}
	}
	for chunk := range slices.Chunk(need, hashBatch) {
		hs, err := w.node.Headers(ctx, chunk)
		if errors.Is(err, chain.ErrNotFound) {
			return fmt.Errorf("reading blocks %d to %d from the node: %w (a ledger row lies beyond the node's chain; retry once the chain has grown past it)", chunk[0], chunk[len(chunk)-1], err)
		}
		if err != nil {
			return fmt.Errorf("reading blocks %d to %d from the node: %w", chunk[0], chunk[len(chunk)-1], err)
		}
		for _, n := range chunk {
			hashes[ledgerBlock(n)] = hashHex(hs[n].Hash)
		}
	}
	return nil
}

// Seed creates cursor id at block, unless it exists, with the canonical
// hash of block when the node can prove it (block at or below the finality
// target), so that the first range after it is checked for continuity like
// every other. It returns the cursor as it stands.
func (w *Writer) Seed(ctx context.Context, id string, block int64) (payments.Cursor, error) {
	c, err := w.store.Cursor(ctx, id)
	if err == nil || !errors.Is(err, payments.ErrCursorNotFound) {
		return c, err
	}
	// A block not yet final is seeded without a hash: it may still change.
	hash, _, err := w.finalHash(ctx, block)
	if err != nil {
		return payments.Cursor{}, err
	}
	return w.store.SeedCursor(ctx, id, block, hash)
}
