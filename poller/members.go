package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/internal/testsignal"
	"github.com/burnpoller/burnpoller/payments"
)

// MemberBackfiller reads, beside the live loop, the history of contracts
// added to a live group: each one's blocks from its first block up to the
// block before the cursor it joined at, through a backfill on its own
// cursor (resumable, checked like every range transaction). Every replica
// runs one; the backfill cursor's lock lets one of them work at a time.
type MemberBackfiller struct {
	w        *Writer
	interval time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	state error

	// Done tells a test that a contract's history is complete.
	Done testsignal.Signal[string]
}

// NewMemberBackfiller returns the backfiller of w's group (w.cfg.Group must
// be set), looking for work every interval.
func NewMemberBackfiller(w *Writer, interval time.Duration, log *slog.Logger) *MemberBackfiller {
	return &MemberBackfiller{w: w, interval: interval, log: log}
}

// Health is readiness: an error naming the contracts still backfilling.
func (b *MemberBackfiller) Health() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Run backfills until ctx ends.
func (b *MemberBackfiller) Run(ctx context.Context) {
	for {
		b.pass(ctx)
		t := time.NewTimer(b.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// pass backfills every member whose history is pending.
func (b *MemberBackfiller) pass(ctx context.Context) {
	group := b.w.cfg.Group.CursorID
	members, err := b.w.store.Members(ctx, group)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("reading the group's contracts", slog.Any("err", err))
		}
		return
	}
	var pending []payments.Member
	for _, m := range members {
		if m.Pending() {
			pending = append(pending, m)
		} else {
			b.w.metrics.memberBackfill(m.Contract, 0)
		}
	}
	b.setState(pending)
	for _, m := range pending {
		if ctx.Err() != nil {
			return
		}
		b.backfill(ctx, group, m)
	}
}

func (b *MemberBackfiller) setState(pending []payments.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state = nil
	if len(pending) > 0 {
		m := pending[0]
		b.state = fmt.Errorf("backfilling contract %s (blocks %d-%d)", m.Contract, m.FirstBlock, m.LiveFrom-1)
		if len(pending) > 1 {
			b.state = fmt.Errorf("%w and %d more", b.state, len(pending)-1)
		}
	}
}

// MemberBackfillID is the backfill cursor of member contract of group.
func MemberBackfillID(group, contract string, first, liveFrom int64) string {
	return backfillID(group+"+"+contract, first, strconv.FormatInt(liveFrom-1, 10))
}

func (b *MemberBackfiller) backfill(ctx context.Context, group string, m payments.Member) {
	cfg := b.w.cfg
	cfg.Contracts = []common.Address{common.HexToAddress(m.Contract)}
	cfg.Group = nil
	mw := NewWriter(cfg, b.w.store, b.w.node, b.w.metrics, b.log)
	id := MemberBackfillID(group, m.Contract, m.FirstBlock, m.LiveFrom)
	log := b.log.With(slog.String("contract", m.Contract), slog.String("backfill_cursor", id))
	log.Info("backfilling the history of a contract added to the group",
		slog.Int64("from", m.FirstBlock), slog.Int64("to", m.LiveFrom-1))
	var lastLog time.Time
	prog, err := Backfill(ctx, mw, BackfillConfig{ID: id, From: m.FirstBlock, To: m.LiveFrom - 1,
		Progress: func(p BackfillProgress) {
			b.w.metrics.memberBackfill(m.Contract, p.Total-p.Done)
			if time.Since(lastLog) >= 10*time.Second || p.Done >= p.Total {
				lastLog = time.Now()
				log.Info("contract backfill progress", slog.Int64("blocks_done", p.Done), slog.Int64("blocks_total", p.Total),
					slog.Int64("inserted", p.Inserted))
			}
		}})
	switch {
	case err == nil && prog.Complete:
		if err := b.w.store.MarkBackfilled(ctx, group, m.Contract, m.LiveFrom); err != nil {
			log.Error("recording the contract's backfill as complete", slog.Any("err", err))
			return
		}
		b.w.metrics.memberBackfill(m.Contract, 0)
		log.Info("the contract's history is complete", slog.Int64("inserted", prog.Inserted))
		b.Done.Send(m.Contract)
	case errors.Is(err, ErrBackfillBusy):
		log.Debug("another replica is backfilling the contract")
	case ctx.Err() != nil:
	default:
		log.Error("contract backfill failed; it resumes on the next pass", slog.Any("err", err))
	}
}
