package consume

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
)

// waker ends a reader's wait: on a notification on payments.EventsChannel,
// every poll interval, and each time the LISTEN session is (re)established,
// so that a read follows every LISTEN and nothing committed before it goes
// unseen. A notification's payload is never read: anyone who can connect
// may send one, and the table is read either way.
type waker struct {
	c    chan struct{}
	poll time.Duration
	pool *pgxpool.Pool // the LISTEN session's; nil polls only
	own  *pgxpool.Pool // the reader's own pool
	log  *slog.Logger
	wg   sync.WaitGroup
}

func newWaker(cfg config, pool *pgxpool.Pool) *waker {
	w := &waker{c: make(chan struct{}, 1), poll: cfg.poll, log: cfg.log, own: pool}
	switch {
	case cfg.noListen:
	case cfg.listen != nil:
		w.pool = cfg.listen
	default:
		w.pool = pool
	}
	return w
}

// start listens until ctx ends, unless told not to (a pool through a
// transaction pooler: it polls only); stop waits for that.
func (w *waker) start(ctx context.Context, listen bool) {
	if w.pool == w.own && !listen {
		w.pool = nil
	}
	if w.pool != nil {
		w.wg.Go(func() { w.listen(ctx) })
	}
}

func (w *waker) stop() { w.wg.Wait() }

// wait returns on a wake-up, after the poll interval, or when ctx ends.
func (w *waker) wait(ctx context.Context) {
	t := time.NewTimer(w.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-w.c:
	}
}

func (w *waker) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

func (w *waker) listen(ctx context.Context) {
	const first, most = 250 * time.Millisecond, 30 * time.Second
	retry := first
	for ctx.Err() == nil {
		err := w.session(ctx, func() { retry = first })
		if ctx.Err() != nil {
			return
		}
		w.log.Debug("listening for payment events failed; polling meanwhile",
			slog.Any("err", err), slog.Duration("retry_in", retry))
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		retry = min(2*retry, most)
	}
}

// session listens on one connection until it fails or ctx ends.
func (w *waker) session(ctx context.Context, listening func()) error {
	c, err := w.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a session to listen on: %w", err)
	}
	// A LISTENing connection never goes back to the pool.
	conn := c.Hijack()
	defer func() {
		// Bounded: a hung socket must not hold up the stop.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+payments.EventsChannel); err != nil {
		return fmt.Errorf("listening on %s: %w", payments.EventsChannel, err)
	}
	listening()
	w.wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("waiting for a notification: %w", err)
		}
		w.wake()
	}
}

// Waker tells its user when to read payment_events again: on each
// notification on burnpoller_events (its payload never read: anyone who can
// connect may send one), each time its LISTEN session is (re)established,
// and, through Wait, every poll interval. It is the wake-up every reader of
// the events shares: Run, RunAtLeastOnce, Follower, and the webhook
// dispatcher, which keeps its watermarks in the database.
type Waker struct{ w *waker }

// NewWaker returns a waker that listens on a session taken out of pool (nil
// polls only), waiting at most poll in Wait.
func NewWaker(pool *pgxpool.Pool, poll time.Duration, log *slog.Logger) *Waker {
	return &Waker{w: &waker{c: make(chan struct{}, 1), poll: poll, pool: pool, log: log}}
}

// Start listens until ctx ends; Stop waits for that.
func (w *Waker) Start(ctx context.Context) { w.w.start(ctx, true) }

// Stop waits until the listening session is closed (ctx given to Start
// ended).
func (w *Waker) Stop() { w.w.stop() }

// C receives a value on each wake-up (coalesced).
func (w *Waker) C() <-chan struct{} { return w.w.c }

// Wait returns on a wake-up, after the poll interval, or when ctx ends.
func (w *Waker) Wait(ctx context.Context) { w.w.wait(ctx) }
