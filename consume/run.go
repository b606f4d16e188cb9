package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/payments"
)

// Handler handles one event with tx, the transaction in which the consumer
// also stores its offset: what it writes with tx commits together with the
// offset, or not at all. It must not commit or roll back tx (both return
// ErrTxOwned); tx.Begin gives a savepoint if it needs one. A nil return
// hands over the next event. An error rolls the whole batch back and the
// batch is retried after a back-off; wrap it in Permanent to stop instead.
// ctx ends with the batch's BatchTimeout.
type Handler func(ctx context.Context, tx pgx.Tx, e payments.Event) error

// Run hands each event of payment_events after name's offset to h, in seq
// order, each in a transaction that also moves the offset past it, until
// ctx ends; see the package doc. A name seen for the first time starts at
// StartAfter (default: the first event) or StartAtEnd.
//
// Run returns nil once ctx has ended (the batch in flight rolled back). It
// returns an error when it cannot go on: bad options; a database without
// the schema or older than migration 11 (the error wraps
// migrations.ErrPending and says to run `poller migrate`); a *DivergedError
// (ErrDiverged); ErrGap; ErrNoOffset; a missing grant; or an error h
// wrapped in Permanent. Every other failure — the database gone for a
// while, a timeout, h's errors — is logged (Logger), counted (Metrics) and
// retried after a back-off.
func Run(ctx context.Context, pool *pgxpool.Pool, name string, h Handler, opts ...Option) error {
	c, err := newConsumer(pool, name, h != nil, opts)
	if err != nil {
		return err
	}
	return c.loop(ctx, func(ctx context.Context) (bool, error) { return c.batch(ctx, h) })
}

// consumer is one Run or RunAtLeastOnce.
type consumer struct {
	pool    *pgxpool.Pool
	name    string
	cfg     config
	metrics *metrics
	log     *slog.Logger
	// size is the next window's size in seqs: cfg.batch, unless a failed
	// batch asked for the events before the failing one first.
	size int
}

func newConsumer(pool *pgxpool.Pool, name string, handler bool, opts []Option) (*consumer, error) {
	switch {
	case pool == nil:
		return nil, errors.New("consume: nil pool")
	case name == "":
		return nil, errors.New("consume: empty consumer name")
	case !handler:
		return nil, fmt.Errorf("consume: consumer %q: nil handler", name)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.reg, name)
	if err != nil {
		return nil, err
	}
	return &consumer{pool: pool, name: name, cfg: cfg, metrics: m, size: cfg.batch,
		log: cfg.log.With(slog.String("consumer", name))}, nil
}

// loop runs step until ctx ends or step fails for good, retrying other
// failures after a back-off, and waits for a wake-up whenever step has
// read everything committed.
func (c *consumer) loop(ctx context.Context, step func(context.Context) (more bool, err error)) error {
	ctx, cancel := context.WithCancel(ctx)
	w := newWaker(c.cfg, c.pool)
	defer func() {
		cancel()
		w.stop()
	}()
	prepared := false
	for failures := 0; ctx.Err() == nil; {
		var (
			more bool
			err  error
		)
		if !prepared {
			// The waker listens once the pool is known: not through a
			// transaction pooler.
			var listen bool
			listen, err = c.prepare(ctx)
			prepared = err == nil
			if prepared {
				w.start(ctx, listen)
			}
		}
		if err == nil {
			more, err = step(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if _, ok := errors.AsType[*DivergedError](err); !ok {
				err = fmt.Errorf("consumer %q: %w", c.name, err)
			}
			if fatal(err) {
				return err
			}
			failures++
			c.metrics.failures.Inc()
			wait := backoff(failures)
			c.log.Warn("consumer batch failed; retrying", slog.Any("err", err),
				slog.Int("failures", failures), slog.Duration("retry_in", wait))
			sleep(ctx, wait)
			continue
		}
		failures = 0
		if !more {
			w.wait(ctx)
		}
	}
	return nil
}

// prepare checks the schema and the pool (checkPool: whether the waker may
// listen on it) and registers the name.
func (c *consumer) prepare(ctx context.Context) (listen bool, err error) {
	qctx, cancel := context.WithTimeout(ctx, c.cfg.batchTimeout)
	defer cancel()
	if err := checkSchema(qctx, c.pool, offsetsVersion); err != nil {
		return false, err
	}
	if listen, err = checkPool(qctx, c.pool, c.cfg); err != nil {
		return false, err
	}
	return listen, register(qctx, c.pool, c.name, c.cfg.start, c.cfg.owner)
}

// batch is one transaction of Run: read the offset and the window after
// it, lock the offset row, hand over the window's events, move the offset,
// commit.
func (c *consumer) batch(ctx context.Context, h Handler) (more bool, err error) {
	started := time.Now()
	bctx, cancel := context.WithTimeout(ctx, c.cfg.batchTimeout)
	defer cancel()
	// Read before the transaction, which then holds nothing of burnpoller's
	// but the name's offset row while the handler runs: no lock on
	// payment_events that a migration altering it would queue behind (and
	// writers behind the migration). When nothing is new, no transaction.
	peek, err := peekOffset(bctx, c.pool, c.name)
	if err != nil {
		return false, err
	}
	from := peek.Offset
	size := c.size
	c.size = c.cfg.batch
	win, err := readWindow(bctx, c.pool, from, size, c.cfg.filter)
	if err != nil {
		return false, c.named(err)
	}
	if win.end == from {
		c.report(Progress{Name: c.name, Offset: from, Last: win.last})
		return false, nil
	}
	// Read committed whatever the server's default: the offset row,
	// locked after another consumer of the name moved it, reads as moved
	// rather than failing as a serialization conflict.
	// The bounds are in force from BEGIN on.
	tx, err := c.pool.BeginTx(bctx, database.BeginBounded(
		database.Bound{Setting: "statement_timeout", Limit: c.cfg.batchTimeout},
		database.Bound{Setting: "idle_in_transaction_session_timeout", Limit: c.cfg.batchTimeout}))
	if err != nil {
		return false, fmt.Errorf("beginning a batch: %w", interpret(err))
	}
	defer rollback(ctx, tx)
	held, ok, err := lockOffset(bctx, tx, c.name)
	if err != nil {
		return false, err
	}
	if !ok {
		c.report(Progress{Name: c.name, Offset: from, Last: win.last, Standby: true})
		return false, nil
	}
	if held != from {
		// Another consumer of the name moved the offset since it was
		// read: read again from where it is.
		return true, nil
	}
	to, handled, cut := from, 0, false
	for _, e := range win.events {
		// Past half the batch's time, commit what is done: the next batch
		// goes on from there.
		if handled > 0 && time.Since(started) > c.cfg.batchTimeout/2 {
			cut = true
			break
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err := h(bctx, ownedTx{tx}, e); err != nil {
			if e.Seq-1 > from.Seq {
				// Retried: first the events before this one, which then
				// commit, then this one alone at the head of a batch.
				c.size = int(e.Seq - 1 - from.Seq)
			}
			return false, &handlerError{seq: e.Seq, err: err}
		}
		to = PositionOf(e)
		handled++
	}
	if !cut {
		to = win.end
	}
	if err := storeOffset(bctx, tx, c.name, to); err != nil {
		return false, err
	}
	if c.cfg.beforeCommit != nil {
		c.cfg.beforeCommit(tx)
	}
	if err := tx.Commit(bctx); err != nil {
		// If COMMIT reached the server after all, the next batch finds the
		// offset moved: the events are not handed over again.
		return false, fmt.Errorf("committing the batch after seq %d: %w", from.Seq, interpret(err))
	}
	c.report(Progress{Name: c.name, Offset: to, Last: win.last, Handled: handled})
	return win.full || cut, nil
}

// standby reports the offset another consumer of the name holds.
func (c *consumer) standby(ctx context.Context) error {
	p, err := peekOffset(ctx, c.pool, c.name)
	if err != nil {
		return err
	}
	c.report(p)
	return nil
}

func (c *consumer) report(p Progress) {
	c.metrics.observe(p)
	if c.cfg.progress != nil {
		c.cfg.progress(p)
	}
}

// named gives a DivergedError the consumer's name.
func (c *consumer) named(err error) error {
	if d, ok := errors.AsType[*DivergedError](err); ok {
		d.Name = c.name
	}
	return err
}

// ownedTx is the transaction as a Handler sees it: the consumer commits it.
type ownedTx struct{ pgx.Tx }

// Commit refuses: the offset and the handler's writes commit together.
func (ownedTx) Commit(context.Context) error { return ErrTxOwned }

// Rollback refuses: a failing handler returns its error, and the consumer
// rolls back.
func (ownedTx) Rollback(context.Context) error { return ErrTxOwned }

// rollback ends tx, even once ctx has ended, within a second.
func rollback(ctx context.Context, tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = tx.Rollback(rctx)
}

// backoff is the wait after the n-th failure in a row: from 100ms,
// doubling, at most 30s, each anywhere in its upper half.
func backoff(n int) time.Duration {
	d := min(100*time.Millisecond<<min(n-1, 9), 30*time.Second)
	return d/2 + rand.N(d/2+1) //nolint:gosec // back-off jitter, not a secret
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
