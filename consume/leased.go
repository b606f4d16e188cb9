package consume

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
)

// EventHandler handles one event whose effects live outside this database
// (an HTTP call, a message on a queue). It may be handed the same event
// again — after a crash between its effect and the offset's update, or a
// lease that ran out — so its effect must be idempotent on e.EventID. A
// nil return hands over the next event; an error is retried after a
// back-off, from that event (wrap it in Permanent to stop instead). ctx
// ends with the batch's BatchTimeout.
type EventHandler func(ctx context.Context, e payments.Event) error

// RunAtLeastOnce hands each event of payment_events after name's offset to
// h, in seq order, storing the offset after h returned, until ctx ends; see
// the package doc. No transaction is open while h runs: the consumer holds
// a lease on the name instead, so that one consumer of a name at a time
// hands events over. It returns as Run does; on return it stores the
// offset of the events handled so far and gives up the lease.
func RunAtLeastOnce(ctx context.Context, pool *pgxpool.Pool, name string, h EventHandler, opts ...Option) error {
	c, err := newConsumer(pool, name, h != nil, opts)
	if err != nil {
		return err
	}
	owner := leaseOwner()
	defer func() {
		// A consumer on standby takes over at once rather than when the
		// lease runs out.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := release(rctx, pool, name, owner); err != nil {
			c.log.Debug("releasing the lease failed", slog.Any("err", err))
		}
	}()
	return c.loop(ctx, func(ctx context.Context) (bool, error) { return c.leased(ctx, owner, h) })
}

// lease is how long a claim or an offset update keeps the name: twice the
// batch's time, which bounds the handlers' context.
func (c *consumer) lease() time.Duration { return 2 * c.cfg.batchTimeout }

// leased is one batch of RunAtLeastOnce: claim the name, check the offset,
// read the window after it, hand over its events, store the offset of
// those handled (even after a failure: their effects happened).
func (c *consumer) leased(ctx context.Context, owner string, h EventHandler) (more bool, err error) {
	started := time.Now()
	bctx, cancel := context.WithTimeout(ctx, c.cfg.batchTimeout)
	defer cancel()
	from, ok, err := claim(bctx, c.pool, c.name, owner, c.lease())
	if err != nil {
		return false, err
	}
	if !ok {
		return false, c.standby(bctx)
	}
	win, err := readWindow(bctx, c.pool, from, c.cfg.batch, c.cfg.filter)
	if err != nil {
		return false, c.named(err)
	}
	to, handled, cut := from, 0, false
	var failed error
	for _, e := range win.events {
		if ctx.Err() != nil || (handled > 0 && time.Since(started) > c.cfg.batchTimeout/2) {
			cut = true
			break
		}
		if err := h(bctx, e); err != nil {
			failed, cut = &handlerError{seq: e.Seq, err: err}, true
			break
		}
		to = PositionOf(e)
		handled++
	}
	if !cut {
		to = win.end
	}
	if to == from {
		c.report(Progress{Name: c.name, Offset: from, Last: win.last})
		return false, failed
	}
	sctx := bctx
	if bctx.Err() != nil {
		// Stopping, or the handlers used up the batch's time: their
		// effects happened, so their offset is stored all the same.
		var scancel context.CancelFunc
		sctx, scancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
	}
	held, err := storeLeased(sctx, c.pool, c.name, owner, from, to, c.lease())
	if err != nil {
		return false, errors.Join(failed, err)
	}
	if !held {
		// The lease ran out during the batch and another consumer took the
		// name: it hands these events over again (at least once).
		c.log.Warn("lease lost during a batch; its events may be handed over again",
			slog.Int64("from", from.Seq), slog.Int64("to", to.Seq))
		return failed == nil, failed
	}
	c.report(Progress{Name: c.name, Offset: to, Last: win.last, Handled: handled})
	if failed != nil {
		return false, failed
	}
	return win.full || cut, nil
}
