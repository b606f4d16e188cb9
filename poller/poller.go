// Package poller turns burn logs into payments: one database transaction per
// block range that locks the cursor row, reads the chain, inserts the range's
// payments and advances the cursor, so that only one replica works at a time
// and a range is either wholly recorded or not at all.
package poller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Node is what the poller needs from the chain; *chain.Endpoints is the
// real one. BurnRange may return a range ending before maxTo (a provider's
// limit); the poller commits what it got.
type Node interface {
	Target(ctx context.Context) (chain.Target, error)
	BurnRange(ctx context.Context, contract common.Address, from, maxTo uint64) (chain.Range, error)
	// HintDensity tells how many logs the ledger holds over a span of blocks.
	HintDensity(blocks uint64, logs int)
}

// Config is the poller's behaviour; see cmd/poller for the variables behind it.
type Config struct {
	CursorID      string
	ChainID       uint64
	Contract      common.Address
	StartBlock    uint64
	PollInterval  time.Duration
	MaxBlockRange uint64
	LockWait      time.Duration
	TxTimeout     time.Duration
	// DrainTimeout is how long an in-flight transaction may go on after Run's
	// context is cancelled before it is rolled back.
	DrainTimeout time.Duration
	// MaxBackoff caps the wait after errors; zero means 30 seconds.
	MaxBackoff time.Duration
	// RescanDepth is how many committed blocks below the cursor a rescan
	// re-reads; zero disables rescans.
	RescanDepth uint64
	// RescanInterval is the least time between rescans.
	RescanInterval time.Duration
	// Hook, if set, runs for every newly inserted payment in its transaction.
	Hook *payments.Hook
	// UntilCaughtUp makes Run return once the cursor has reached the target.
	UntilCaughtUp bool
	// Wake, if set, ends the wait after reaching the target early: a new
	// head arrived (chain.WatchHeads).
	Wake <-chan struct{}
}

// ErrFinalityViolation means the chain no longer contains the block the
// cursor was committed at: a reorganisation below the finality target.
var ErrFinalityViolation = errors.New("finality violation")

// Poller is the loop. Its methods other than Run are safe to call
// concurrently with Run.
type Poller struct {
	cfg     Config
	store   *payments.Store
	node    Node
	metrics *Metrics
	log     *slog.Logger
	beat    *Heartbeat

	mu           sync.Mutex
	violation    string // non-empty once latched
	violated     payments.Cursor
	failingSince time.Time // first of the current run of failed polls
	failingClass chain.Class

	hinted bool // the node has been told the ledger's log density (Run goroutine only)
}

// FailingFor is how long polls must have failed in a row before readiness
// reports it: long enough to ride out a provider's hiccup.
const FailingFor = 5 * time.Minute

// Health returns why the poller is not ready, or nil: a latched finality
// violation, or polls failing without a success for FailingFor.
func (p *Poller) Health() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.violation != "":
		return errors.New(p.violation)
	case !p.failingSince.IsZero() && time.Since(p.failingSince) > FailingFor:
		return fmt.Errorf("failing since %s (%s)", p.failingSince.UTC().Format(time.RFC3339), p.failingClass)
	}
	return nil
}

// noteResult tracks the run of failed polls for Health.
func (p *Poller) noteResult(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.failingSince = time.Time{}
		return
	}
	if p.failingSince.IsZero() {
		p.failingSince = time.Now()
	}
	p.failingClass = chain.ClassOf(err)
}

// New returns a poller. beat is the liveness heartbeat it keeps while running.
func New(cfg Config, store *payments.Store, node Node, metrics *Metrics, beat *Heartbeat, log *slog.Logger) *Poller {
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Poller{cfg: cfg, store: store, node: node, metrics: metrics, beat: beat, log: log}
}

// WakeOn sets Config.Wake; call it before Run.
func (p *Poller) WakeOn(wake <-chan struct{}) { p.cfg.Wake = wake }

// Violation returns the latched finality violation, or "" if there is none.
func (p *Poller) Violation() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.violation
}

// outcome is what one poll did.
type outcome int

const (
	outIdle      outcome = iota // cursor at target, or stopped before taking the lock
	outCommitted                // range committed, target reached
	outBehind                   // range committed, more to do at once
	outStandby                  // another replica holds the lock
)

// Run polls until ctx is cancelled. Cancelling ctx stops new transactions and
// lock waits at once; a transaction already holding the lock may finish for
// up to DrainTimeout before it is rolled back. Run returns nil after a clean
// stop, or an error only when it cannot start (the cursor cannot be seeded
// before ctx ends).
func (p *Poller) Run(ctx context.Context) error {
	// hard outlives ctx by DrainTimeout: it bounds the in-flight transaction.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	go func() {
		select {
		case <-hard.Done():
			return
		case <-ctx.Done():
		}
		t := time.NewTimer(p.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-hard.Done():
		case <-t.C:
			cancelHard()
		}
	}()

	if err := p.seed(ctx); err != nil {
		return err
	}
	b := p.newBackoff()
	for ctx.Err() == nil {
		p.beat.Beat()
		if p.Violation() != "" {
			p.checkReset(ctx)
			p.sleep(ctx, p.cfg.PollInterval)
			continue
		}
		out, err := p.poll(ctx, hard)
		p.noteResult(err)
		switch {
		case errors.Is(err, ErrFinalityViolation):
			p.latch(ctx, err)
			if p.cfg.UntilCaughtUp {
				return err
			}
		case err != nil && ctx.Err() != nil:
			p.log.Info("transaction ended by shutdown", slog.Any("err", err))
		case err != nil:
			wait := p.retryWait(b, err)
			p.log.Error("poll failed; rolled back, retrying", slog.Any("err", err),
				slog.String("class", string(chain.ClassOf(err))), slog.Duration("retry_in", wait))
			p.sleep(ctx, wait)
		case out == outBehind, out == outStandby:
			b.Reset()
		case p.cfg.UntilCaughtUp && ctx.Err() == nil:
			p.log.Info("caught up with the target; stopping as asked")
			return nil
		default:
			b.Reset()
			p.idle(ctx)
		}
	}
	return nil
}

// idle waits POLL_INTERVAL after reaching the target, or less if a new head
// arrives first.
func (p *Poller) idle(ctx context.Context) {
	if p.cfg.Wake == nil {
		p.sleep(ctx, p.cfg.PollInterval)
		return
	}
	t := time.NewTimer(p.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-p.cfg.Wake:
	}
	p.beat.Beat()
}

// seed creates the cursor row at START_BLOCK-1 unless it exists, retrying
// while the database is unreachable.
func (p *Poller) seed(ctx context.Context) error {
	_, err := backoff.Retry(ctx, func() (payments.Cursor, error) {
		p.beat.Beat()
		c, err := p.store.SeedCursor(ctx, p.cfg.CursorID, int64(p.cfg.StartBlock)-1)
		if err != nil {
			return c, err
		}
		if c.Block != int64(p.cfg.StartBlock)-1 {
			p.log.Info("cursor exists; START_BLOCK does not move it",
				slog.String("cursor_id", c.ID), slog.Int64("cursor_block", c.Block), slog.Uint64("start_block", p.cfg.StartBlock))
		}
		p.metrics.CursorBlock.Set(float64(c.Block))
		return c, nil
	}, backoff.WithBackOff(p.newBackoff()), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, d time.Duration) {
		p.log.Warn("seeding cursor failed; retrying", slog.Any("err", err), slog.Duration("retry_in", d))
	}))
	if err != nil {
		return fmt.Errorf("seeding cursor %q: %w", p.cfg.CursorID, err)
	}
	return nil
}

// poll runs one range's transaction. It reads, top to bottom: begin, lock
// the cursor, read the target, get the logs, insert, advance, commit.
//
// The lock, the inserts and the cursor update share one transaction on
// purpose: a replica that loses its session (crash, freeze, partition) can
// never commit, so no lease or fencing token is needed, and the server-side
// timeouts set in Begin free the lock when a holder stops responding.
func (p *Poller) poll(stop, hard context.Context) (out outcome, err error) {
	start := time.Now()
	defer func() {
		p.metrics.PollDuration.Observe(time.Since(start).Seconds())
		p.metrics.Polls.WithLabelValues(resultLabel(out, err)).Inc()
	}()
	ctx, cancel := context.WithTimeout(hard, p.cfg.TxTimeout)
	defer cancel()
	lockStart := time.Now()
	tx, cur, err := p.begin(stop, ctx, p.cfg.CursorID)
	p.metrics.LockWait.Observe(time.Since(lockStart).Seconds())
	if tx != nil {
		defer tx.Rollback()
	}
	switch {
	case errors.Is(err, payments.ErrLockTimeout):
		return outStandby, nil
	case err != nil && stop.Err() != nil:
		return outIdle, nil
	case err != nil:
		return outIdle, err
	}
	p.metrics.LockHeld.Set(1)
	defer p.metrics.LockHeld.Set(0)
	p.metrics.CursorBlock.Set(float64(cur.Block))

	target, err := p.node.Target(ctx)
	if err != nil {
		return outIdle, fmt.Errorf("reading the target: %w", err)
	}
	p.metrics.TargetBlock.Set(float64(target.Highest))
	p.metrics.LagBlocks.Set(float64(max(target.Highest-cur.Block, 0)))

	if _, _, ok := NextRange(cur.Block, target.Block, p.cfg.MaxBlockRange); !ok {
		// Rescan only through a node that can prove the cursor block: one
		// behind it may lack the block or sit on a minority fork.
		var rescanned rescanResult
		if target.Block >= cur.Block {
			if rescanned, err = p.rescan(ctx, tx, cur); err != nil {
				return outIdle, err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return outIdle, err
		}
		p.rescanned(rescanned)
		return outIdle, nil
	}

	if !p.hinted {
		p.hintDensity(ctx, tx, cur)
	}
	res, err := p.advanceMany(ctx, tx, cur, target.Block)
	if err != nil {
		return outIdle, err
	}
	if err := tx.Commit(ctx); err != nil {
		return outIdle, err
	}
	p.committed(res)
	p.metrics.CursorBlock.Set(float64(res.to))
	p.metrics.LagBlocks.Set(float64(max(target.Highest-res.to, 0)))
	p.log.Info("range committed", slog.Int64("from", res.from), slog.Int64("to", res.to),
		slog.Int("logs", res.logs), slog.Int64("inserted", res.inserted), slog.Int64("duplicates", res.dups),
		slog.Int("rejected", res.rejected), slog.Int64("target", target.Block))
	if res.to < target.Block {
		return outBehind, nil
	}
	return outCommitted, nil
}

// begin opens a bounded transaction and locks cursor id in it. Until the
// lock is held nothing is in flight, so stop cancels the wait at once;
// after that the transaction runs under ctx. tx is nil only when Begin
// itself failed; otherwise the caller rolls it back when done.
func (p *Poller) begin(stop, ctx context.Context, id string) (*payments.Tx, payments.Cursor, error) {
	waitCtx, cancelWait := context.WithCancel(ctx)
	unhook := context.AfterFunc(stop, cancelWait)
	defer func() { unhook(); cancelWait() }()
	tx, err := p.store.Begin(waitCtx, payments.Limits{LockWait: p.cfg.LockWait, TxTimeout: p.cfg.TxTimeout})
	if err != nil {
		return nil, payments.Cursor{}, err
	}
	cur, err := tx.LockCursor(waitCtx, id)
	return tx, cur, err
}

// rangeResult is what one range recorded.
type rangeResult struct {
	from, to       int64
	logs, rejected int
	inserted, dups int64
}

// densitySample is how many committed blocks tell the log density.
const densitySample = 256

// hintDensity tells the node how dense the ledger's recent blocks are, so
// that a replica taking over sizes its first range right.
func (p *Poller) hintDensity(ctx context.Context, tx *payments.Tx, cur payments.Cursor) {
	p.hinted = true
	from := max(cur.Block-densitySample+1, int64(p.cfg.StartBlock))
	if cur.Block < from {
		return
	}
	n, err := tx.CountPayments(ctx, p.cfg.ChainID, lowerHex(p.cfg.Contract), from, cur.Block)
	if err != nil {
		p.log.Debug("reading the ledger's log density", slog.Any("err", err))
		return
	}
	p.node.HintDensity(uint64(cur.Block-from+1), n)
}

// batchBudget is how long one transaction keeps recording ranges while
// behind: long enough to save commits and lock hand-overs, short enough that
// a failure loses little and the transaction stays far from TX_TIMEOUT.
func (p *Poller) batchBudget() time.Duration {
	return min(p.cfg.TxTimeout/4, 2*time.Second)
}

// advanceMany records ranges from the block after cur towards target in one
// transaction, fetching each next range while the current one is inserted,
// until it reaches target or the batch budget; then it notifies once and
// moves cur to the end of the last range, all inside tx, which the caller
// commits. At most two ranges are in memory. A range is fetched only once
// the previous one is being recorded, so nothing fetched is thrown away
// unless the transaction fails.
func (p *Poller) advanceMany(ctx context.Context, tx *payments.Tx, cur payments.Cursor, target int64) (rangeResult, error) {
	type fetched struct {
		r   chain.Range
		err error
	}
	var (
		permits = make(chan struct{}, 1)
		results = make(chan fetched, 1)
		wg      sync.WaitGroup
	)
	fctx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		from := cur.Block + 1
		for {
			select {
			case <-fctx.Done():
				return
			case <-permits:
			}
			_, maxTo, ok := NextRange(from-1, target, p.cfg.MaxBlockRange)
			if !ok {
				return
			}
			r, err := p.node.BurnRange(fctx, p.cfg.Contract, uint64(from), uint64(maxTo))
			if err != nil {
				err = fmt.Errorf("fetching burns of blocks [%d, %d]: %w", from, maxTo, err)
			}
			select {
			case results <- fetched{r, err}:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
			from = int64(r.To.Number) + 1
		}
	})

	deadline := time.Now().Add(p.batchBudget())
	res := rangeResult{from: cur.Block + 1, to: cur.Block}
	hash := cur.Hash
	var note payments.Notification
	permits <- struct{}{}
	for {
		var f fetched
		select {
		case f = <-results:
		case <-ctx.Done():
			return rangeResult{}, ctx.Err()
		}
		if f.err != nil {
			return rangeResult{}, f.err
		}
		r, from := f.r, res.to+1
		to := int64(r.To.Number)
		if r.From.Number != uint64(from) || to < from || to > target {
			return rangeResult{}, fmt.Errorf("%w: asked for blocks from %d to at most %d, got [%d, %d]", chain.ErrBadReply, from, target, r.From.Number, to)
		}
		if hash != "" && !strings.EqualFold(r.From.ParentHash.Hex(), hash) {
			if from == cur.Block+1 {
				return rangeResult{}, &violationError{cursor: cur, block: r.From}
			}
			// The node changed its chain between two of our own reads.
			return rangeResult{}, fmt.Errorf("%w: block %d's parent is %s, but block %d was %s a moment ago",
				chain.ErrBadReply, from, r.From.ParentHash.Hex(), from-1, hash)
		}
		more := to < target && time.Now().Before(deadline)
		if more {
			permits <- struct{}{} // the next range comes while this one is written
		}
		ins, dups, err := p.record(ctx, tx, r)
		if err != nil {
			return rangeResult{}, err
		}
		note.Add(ins)
		res.to, hash = to, strings.ToLower(r.To.Hash.Hex())
		res.logs += len(r.Burns)
		res.rejected += len(r.Rejected)
		res.inserted += int64(len(ins))
		res.dups += dups
		if !more {
			break
		}
	}
	if err := tx.Notify(ctx, note); err != nil {
		return rangeResult{}, err
	}
	if err := tx.AdvanceCursor(ctx, cur.ID, cur.Block, res.to, hash); err != nil {
		return rangeResult{}, err
	}
	return res, nil
}

// committed counts a committed range in the metrics.
func (p *Poller) committed(res rangeResult) {
	p.metrics.PaymentsInserted.Add(float64(res.inserted))
	p.metrics.PaymentsDuplicate.Add(float64(res.dups))
	p.metrics.RejectedLogs.Add(float64(res.rejected))
}

// record inserts a range's payments and rejected logs inside tx, runs the
// payment hook for the new ones, and returns them and the number of
// duplicates. The caller notifies, once per transaction.
func (p *Poller) record(ctx context.Context, tx *payments.Tx, r chain.Range) (inserted []payments.Inserted, dups int64, err error) {
	if len(r.Rejected) > 0 {
		rs, err := p.toRejected(r.Rejected)
		if err != nil {
			return nil, 0, err
		}
		if _, err := tx.InsertRejected(ctx, rs); err != nil {
			return nil, 0, err
		}
		for _, rj := range r.Rejected {
			p.log.Error("burn-event log does not decode; recorded in rejected_logs, not credited",
				slog.String("tx", rj.Log.TxHash.Hex()), slog.Uint64("log_index", uint64(rj.Log.Index)),
				slog.Uint64("block", rj.Log.BlockNumber), slog.String("reason", rj.Reason))
		}
	}
	ps, err := p.toPayments(r.Burns)
	if err != nil {
		return nil, 0, err
	}
	ins, err := tx.InsertPayments(ctx, ps)
	if err != nil {
		return nil, 0, err
	}
	// The application's side effect commits with the payments or not at
	// all; duplicates trigger nothing.
	if err := tx.RunHook(ctx, p.cfg.Hook, ins); err != nil {
		return nil, 0, err
	}
	return ins, int64(len(ps) - len(ins)), nil
}

// rescanResult is what a rescan did; it counts once its transaction commits.
type rescanResult struct {
	ran                 bool
	from, to            int64
	recovered, rejected int64
}

// rescan re-reads the last RescanDepth committed blocks, when due, and
// inserts any burn missing from the ledger: a node once answered with less
// than the chain holds. It runs inside the idle transaction, under the lock,
// and never moves the cursor. A committed cursor block that is no longer
// canonical is a finality violation. The schedule is read against the
// database's clock, so replicas with skewed clocks agree on it.
func (p *Poller) rescan(ctx context.Context, tx *payments.Tx, cur payments.Cursor) (rescanResult, error) {
	// The schedule lives in the cursor row, so the group rescans once per
	// interval however many replicas it has.
	if p.cfg.RescanDepth == 0 || cur.Block < int64(p.cfg.StartBlock) ||
		(!cur.RescannedAt.IsZero() && cur.Now.Sub(cur.RescannedAt) < p.cfg.RescanInterval) {
		return rescanResult{}, nil
	}
	res := rescanResult{ran: true, from: max(cur.Block-int64(p.cfg.RescanDepth)+1, int64(p.cfg.StartBlock)), to: cur.Block}
	var recovered payments.Notification
	for next := res.from; next <= cur.Block; {
		r, err := p.node.BurnRange(ctx, p.cfg.Contract, uint64(next), uint64(cur.Block))
		if err != nil {
			return rescanResult{}, fmt.Errorf("rescanning blocks [%d, %d]: %w", next, cur.Block, err)
		}
		if r.From.Number != uint64(next) || r.To.Number < r.From.Number || r.To.Number > uint64(cur.Block) {
			return rescanResult{}, fmt.Errorf("%w: rescan asked for blocks [%d, %d], got [%d, %d]", chain.ErrBadReply, next, cur.Block, r.From.Number, r.To.Number)
		}
		if int64(r.To.Number) == cur.Block && cur.Hash != "" && !strings.EqualFold(r.To.Hash.Hex(), cur.Hash) {
			return rescanResult{}, &violationError{cursor: cur, block: r.To, atCursor: true}
		}
		ins, _, err := p.record(ctx, tx, r)
		if err != nil {
			return rescanResult{}, err
		}
		recovered.Add(ins)
		res.recovered += int64(len(ins))
		res.rejected += int64(len(r.Rejected))
		next = int64(r.To.Number) + 1
	}
	if err := tx.Notify(ctx, recovered); err != nil {
		return rescanResult{}, err
	}
	if err := tx.MarkRescanned(ctx, p.cfg.CursorID); err != nil {
		return rescanResult{}, err
	}
	return res, nil
}

// rescanned counts a committed rescan.
func (p *Poller) rescanned(res rescanResult) {
	if !res.ran {
		return
	}
	p.metrics.Rescans.Inc()
	p.metrics.PaymentsInserted.Add(float64(res.recovered))
	p.metrics.RejectedLogs.Add(float64(res.rejected))
	if res.recovered > 0 {
		p.metrics.RescanRecovered.Add(float64(res.recovered))
		p.log.Error("rescan found burns missing from committed blocks; a node answered with less than the chain holds",
			slog.Int64("recovered", res.recovered), slog.Int64("from", res.from), slog.Int64("to", res.to))
	}
}

// retryWait is the pause after a failed poll: the back-off, at least the
// provider's Retry-After, and the longest back-off for failures that waiting
// will not fix soon.
func (p *Poller) retryWait(b *backoff.ExponentialBackOff, err error) time.Duration {
	wait := b.NextBackOff()
	switch chain.ClassOf(err) {
	case chain.ClassThrottled:
		wait = max(wait, chain.RetryAfterOf(err))
	case chain.ClassPermanent:
		wait = p.cfg.MaxBackoff
	}
	if errors.Is(err, chain.ErrRangeAtOneBlock) {
		wait = p.cfg.MaxBackoff
	}
	return min(wait, max(p.cfg.MaxBackoff, chain.RetryAfterOf(err)))
}

// NextRange returns the next block range after cursor, at most maxRange
// blocks and not beyond target, or ok=false when the cursor has reached the
// target.
func NextRange(cursor, target int64, maxRange uint64) (from, to int64, ok bool) {
	if cursor >= target || maxRange == 0 {
		return 0, 0, false
	}
	from = cursor + 1
	to = target
	if uint64(target-from) >= maxRange {
		to = from + int64(maxRange) - 1
	}
	return from, to, true
}

func (p *Poller) toPayments(burns []chain.Burn) ([]payments.Payment, error) {
	// Chain order: concurrent inserters (a backfill beside the live loop)
	// then take unique-index locks in the same order and cannot deadlock.
	burns = slices.Clone(burns)
	slices.SortFunc(burns, func(a, b chain.Burn) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	ps := make([]payments.Payment, len(burns))
	for i, b := range burns {
		if b.LogIndex > 1<<31-1 || b.BlockNumber > 1<<62 {
			return nil, fmt.Errorf("burn in tx %s: log index %d or block %d out of range", b.TxHash.Hex(), b.LogIndex, b.BlockNumber)
		}
		ps[i] = payments.Payment{
			ChainID:     p.cfg.ChainID,
			Contract:    lowerHex(b.Contract),
			TxHash:      b.TxHash.Hex(),
			LogIndex:    uint32(b.LogIndex),
			BlockNumber: int64(b.BlockNumber),
			BlockHash:   b.BlockHash.Hex(),
			Payer:       lowerHex(b.Payer),
			Digest:      b.Digest.Hex(),
			Amount:      b.Amount,
			BurnedAt:    time.Unix(b.Timestamp, 0).UTC(),
		}
	}
	return ps, nil
}

func (p *Poller) toRejected(rs []chain.Rejected) ([]payments.RejectedLog, error) {
	out := make([]payments.RejectedLog, len(rs))
	for i, r := range rs {
		raw, err := r.Log.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding rejected log: %w", err)
		}
		if r.Log.Index > 1<<31-1 || r.Log.BlockNumber > 1<<62 {
			return nil, fmt.Errorf("rejected log in tx %s: log index %d or block %d out of range", r.Log.TxHash.Hex(), r.Log.Index, r.Log.BlockNumber)
		}
		out[i] = payments.RejectedLog{
			ChainID:     p.cfg.ChainID,
			Contract:    lowerHex(r.Log.Address),
			TxHash:      r.Log.TxHash.Hex(),
			LogIndex:    uint32(r.Log.Index),
			BlockNumber: int64(r.Log.BlockNumber),
			BlockHash:   r.Log.BlockHash.Hex(),
			Raw:         raw,
			Reason:      r.Reason,
		}
	}
	return out, nil
}

// lowerHex is an address as the ledger stores it: lowercase 0x hex. (Hex()
// computes the EIP-55 checksum, a Keccak hash per call, only to lowercase it.)
func lowerHex(a common.Address) string { return hexutil.Encode(a[:]) }

type violationError struct {
	cursor payments.Cursor
	block  chain.Header
	// atCursor: block is the cursor block itself, found with another hash.
	atCursor bool
}

func (e *violationError) Error() string {
	if e.atCursor {
		return fmt.Sprintf("%v: cursor %q was committed at block %d with hash %s, but that block's hash is now %s",
			ErrFinalityViolation, e.cursor.ID, e.cursor.Block, e.cursor.Hash, e.block.Hash.Hex())
	}
	return fmt.Sprintf("%v: cursor %q was committed at block %d with hash %s, but block %d's parent hash is now %s",
		ErrFinalityViolation, e.cursor.ID, e.cursor.Block, e.cursor.Hash, e.block.Number, e.block.ParentHash.Hex())
}

func (e *violationError) Unwrap() error { return ErrFinalityViolation }

// latch stops the poller from advancing until the cursor is reset.
func (p *Poller) latch(ctx context.Context, err error) {
	var v *violationError
	if !errors.As(err, &v) {
		return
	}
	// The gauge first: whoever sees the violation also sees the gauge.
	p.metrics.FinalityViolation.Set(1)
	p.mu.Lock()
	p.violation = fmt.Sprintf("finality violation at block %d", v.cursor.Block)
	p.violated = v.cursor
	p.mu.Unlock()
	chainHash := v.block.ParentHash
	if v.atCursor {
		chainHash = v.block.Hash
	}
	p.log.ErrorContext(ctx, "finality violation: the chain no longer contains the committed cursor block; not advancing until the cursor is reset (poller cursor reset --to N)",
		slog.String("cursor_id", v.cursor.ID), slog.Int64("block", v.cursor.Block),
		slog.String("committed_hash", v.cursor.Hash), slog.String("chain_hash", strings.ToLower(chainHash.Hex())),
		slog.Uint64("seen_at_block", v.block.Number))
}

// checkReset clears a latched violation once an operator has moved the cursor.
func (p *Poller) checkReset(ctx context.Context) {
	p.mu.Lock()
	latched := p.violated
	p.mu.Unlock()
	c, err := p.store.Cursor(ctx, p.cfg.CursorID)
	if err != nil || (c.Block == latched.Block && c.Hash == latched.Hash) {
		return
	}
	p.metrics.FinalityViolation.Set(0)
	p.mu.Lock()
	p.violation, p.violated = "", payments.Cursor{}
	p.mu.Unlock()
	p.log.Warn("cursor was reset; finality violation cleared, resuming",
		slog.Int64("cursor_block", c.Block), slog.String("cursor_hash", c.Hash))
}

func (p *Poller) newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = min(250*time.Millisecond, p.cfg.MaxBackoff)
	b.Multiplier = 2
	b.RandomizationFactor = 0.5
	b.MaxInterval = p.cfg.MaxBackoff
	return b
}

func resultLabel(out outcome, err error) string {
	switch {
	case err != nil:
		return ResultError
	case out == outStandby:
		return ResultStandby
	case out == outCommitted, out == outBehind:
		return ResultCommitted
	}
	return ResultIdle
}

// sleep waits for d or until ctx is done, beating the heartbeat meanwhile:
// a long wait ordered by a provider is not a stall.
func (p *Poller) sleep(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		t := time.NewTimer(min(left, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			p.beat.Beat()
		}
	}
}

// Heartbeat records when a long-running loop last made progress; /livez reads it.
type Heartbeat struct {
	last atomic.Int64
}

// NewHeartbeat returns a heartbeat that beat just now.
func NewHeartbeat() *Heartbeat {
	h := &Heartbeat{}
	h.Beat()
	return h
}

// Beat records progress now.
func (h *Heartbeat) Beat() { h.last.Store(time.Now().UnixNano()) }

// Since returns the time since the last beat.
func (h *Heartbeat) Since() time.Duration { return time.Since(time.Unix(0, h.last.Load())) }
