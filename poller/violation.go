package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// ErrFinalityViolation means the chain no longer contains what the ledger
// committed: a reorganisation below the finality target, or a node that
// served a fork.
var ErrFinalityViolation = errors.New("finality violation")

// ViolationError is a finality violation with both sides: what the ledger
// committed and what the canonical chain holds now. Nothing of the
// transaction that found it is committed.
type ViolationError struct {
	// Cursor is the cursor as the writer locked it.
	Cursor payments.Cursor
	// Block is the committed block the chain contradicts, and Committed its
	// hash as the ledger has it; ChainHash is that block's hash on the chain
	// now ("" when the node did not say).
	Block     int64
	Committed string
	ChainHash string
	// SeenAt is the block whose header showed it.
	SeenAt int64
	// Payment is set when a recorded payment is what the chain contradicts;
	// OnChain is then the canonical burn with its key, or nil if the chain
	// has none.
	Payment *payments.Recorded
	OnChain *payments.Payment
}

func (e *ViolationError) Error() string {
	if e.Payment != nil {
		chainSide := "the canonical chain has no such burn"
		if e.OnChain != nil {
			chainSide = fmt.Sprintf("the canonical chain has it at block %d (%s) log %d, amount %s",
				e.OnChain.BlockNumber, e.OnChain.BlockHash, e.OnChain.LogIndex, e.OnChain.Amount)
		}
		return fmt.Sprintf("%v: payment %d (tx %s log %d) was recorded at block %d with hash %s, amount %s, but %s",
			ErrFinalityViolation, e.Payment.ID, e.Payment.TxHash, e.Payment.LogIndex, e.Payment.BlockNumber,
			e.Payment.BlockHash, e.Payment.Amount, chainSide)
	}
	if e.SeenAt == e.Block {
		return fmt.Sprintf("%v: cursor %q was committed at block %d with hash %s, but that block's hash is now %s",
			ErrFinalityViolation, e.Cursor.ID, e.Block, e.Committed, e.ChainHash)
	}
	return fmt.Sprintf("%v: cursor %q was committed at block %d with hash %s, but block %d's parent hash is now %s",
		ErrFinalityViolation, e.Cursor.ID, e.Block, e.Committed, e.SeenAt, e.ChainHash)
}

// Unwrap makes errors.Is(err, ErrFinalityViolation) hold.
func (e *ViolationError) Unwrap() error { return ErrFinalityViolation }

// LogViolation writes the violation's log line, with both sides.
func LogViolation(ctx context.Context, log *slog.Logger, v *ViolationError) {
	attrs := []any{
		slog.String("cursor_id", v.Cursor.ID), slog.Int64("block", v.Block),
		slog.String("committed_hash", v.Committed), slog.String("chain_hash", v.ChainHash),
		slog.Int64("seen_at_block", v.SeenAt),
	}
	msg := "finality violation: the chain no longer contains the committed cursor block; not advancing until the cursor is reset (poller cursor reset --to N)"
	if p := v.Payment; p != nil {
		msg = "finality violation: the ledger holds a payment the canonical chain does not; nothing committed, not advancing until the cursor is reset (poller verify, then poller cursor reset --to N)"
		attrs = append(attrs, slog.Group("ledger",
			slog.Int64("id", p.ID), slog.String("tx", p.TxHash), slog.Uint64("log_index", uint64(p.LogIndex)),
			slog.Int64("block", p.BlockNumber), slog.String("block_hash", p.BlockHash),
			slog.String("payer", p.Payer), slog.String("digest", p.Digest), slog.String("amount", p.Amount.String())))
		if c := v.OnChain; c != nil {
			attrs = append(attrs, slog.Group("chain",
				slog.String("tx", c.TxHash), slog.Uint64("log_index", uint64(c.LogIndex)),
				slog.Int64("block", c.BlockNumber), slog.String("block_hash", c.BlockHash),
				slog.String("payer", c.Payer), slog.String("digest", c.Digest), slog.String("amount", c.Amount.String())))
		} else {
			attrs = append(attrs, slog.String("chain", "no such burn on the canonical chain"))
		}
	}
	log.ErrorContext(ctx, msg, attrs...)
}

// FailingFor is how long transactions must have failed in a row before
// readiness reports it: long enough to ride out a provider's hiccup.
const FailingFor = 5 * time.Minute

// latch is what readiness knows of the loop: a latched finality violation,
// a hook the group no longer agrees with, a run of failures, or polls that
// vouch for the group without reading its target.
type latch struct {
	mu           sync.Mutex
	violation    string          // non-empty once latched
	violated     payments.Cursor // the cursor as it stood; a reset moves it
	hookMismatch bool
	// contractsMismatch: the group follows a contract this replica's
	// BURN_CONTRACT lacks.
	contractsMismatch bool
	failingSince      time.Time // first of the current run of failures
	failingClass      chain.Class
	// polledAt is when the last poll that marked the group polled began,
	// checkedAt when this replica last knew where the target stands
	// against the cursor (see Loop.checked).
	polledAt, checkedAt time.Time
}

// health returns why the loop is not ready, or nil.
func (l *latch) health() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.violation != "":
		return errors.New(l.violation)
	case l.hookMismatch:
		return errors.New("payment hook differs from the group's")
	case l.contractsMismatch:
		return errors.New("BURN_CONTRACT lacks a contract the group follows")
	case !l.failingSince.IsZero() && time.Since(l.failingSince) > FailingFor:
		return fmt.Errorf("failing since %s (%s)", l.failingSince.UTC().Format(time.RFC3339), l.failingClass)
	case l.polledAt.Sub(l.checkedAt) > FailingFor:
		// Stalled: the other replicas leave the group to this one, which
		// does not read the target the cursor may be behind. An idle
		// chain (the cursor at the head) is checked every poll.
		return fmt.Errorf("target unread since %s", l.checkedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// note tracks the run of failed transactions.
func (l *latch) note(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hookMismatch = errors.Is(err, payments.ErrHookMismatch)
	l.contractsMismatch = errors.Is(err, payments.ErrContractsMismatch)
	if err == nil {
		l.failingSince = time.Time{}
		return
	}
	if l.failingSince.IsZero() {
		l.failingSince = time.Now()
	}
	l.failingClass = chain.ClassOf(err)
}

// set latches v.
func (l *latch) set(v *ViolationError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violation = fmt.Sprintf("finality violation at block %d", v.Block)
	l.violated = v.Cursor
}

// polled notes a poll begun at that marked the group polled.
func (l *latch) polled(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polledAt = at
}

// checked notes that at at this replica knew where the target stands
// against the cursor.
func (l *latch) checked(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checkedAt = at
}

// latched returns the cursor as it stood when the violation latched, and
// whether one is latched.
func (l *latch) latched() (payments.Cursor, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.violated, l.violation != ""
}

func (l *latch) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violation, l.violated = "", payments.Cursor{}
}

func (l *latch) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.violation
}
