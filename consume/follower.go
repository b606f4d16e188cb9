package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
)

// Follower reads payment_events in seq order after a position it keeps in
// memory: the events after it, then each as it commits, waking on a
// notification on burnpoller_events (a hint only) or every PollInterval.
// On every read it checks that the table still holds its position as
// recorded, and returns a *DivergedError when not (see the package doc,
// "Tail loss"). It is the reader a printer of events (`poller events
// --follow`, `poller tail`) or a dispatcher that keeps its own watermark
// can share; a consumer whose place must survive a restart uses Run or
// RunAtLeastOnce instead.
//
// Next is for one goroutine at a time; Start, Stop and Position are safe
// beside it.
type Follower struct {
	pool  *pgxpool.Pool
	cfg   config
	waker *waker

	mu      sync.Mutex // guards pos, started, cancel
	pos     Position
	started bool
	cancel  context.CancelFunc
}

// NewFollower returns a follower of the events after `after` (the zero
// Position: from the first event; LastPosition: from now on; PositionAt:
// after a given seq). It reads nothing until Start.
func NewFollower(pool *pgxpool.Pool, after Position, opts ...Option) (*Follower, error) {
	if pool == nil {
		return nil, errors.New("consume: nil pool")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Follower{pool: pool, cfg: cfg, pos: after, waker: newWaker(cfg, pool)}, nil
}

// Start checks the schema (an error wrapping migrations.ErrPending that says
// to run `poller migrate` when payment_events is missing) and starts
// listening for notifications, until Stop or until ctx ends. It returns
// once started.
func (f *Follower) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("consume: follower started twice")
	}
	if err := checkSchema(ctx, f.pool, eventsVersion); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	f.started, f.cancel = true, cancel
	f.waker.start(lctx)
	return nil
}

// Stop stops listening and waits until the listening session is closed. It
// is safe to call twice or without Start; Next still works after it, by
// polling.
func (f *Follower) Stop() {
	f.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	f.waker.stop()
}

// Position is where the follower is: the last event Next returned or
// passed over.
func (f *Follower) Position() Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos
}

// Next blocks until events after the position that the filters select are
// committed, returns them (at most BatchSize, in seq order), and moves the
// position past them. It returns ctx's error when ctx ends first, a
// *DivergedError (ErrDiverged) when the table no longer holds the position,
// or a database error; the position stays where it was in every case, so
// Next may be called again after a passing failure.
func (f *Follower) Next(ctx context.Context) ([]payments.Event, error) {
	f.mu.Lock()
	started := f.started
	f.mu.Unlock()
	if !started {
		return nil, errors.New("consume: Next before Start")
	}
	for {
		win, err := readWindow(ctx, f.pool, f.Position(), f.cfg.batch, f.cfg.filter)
		if err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.pos = win.end
		f.mu.Unlock()
		if len(win.events) > 0 {
			return win.events, nil
		}
		if !win.full {
			f.waker.wait(ctx)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// Rewind moves a follower that met a *DivergedError back to the latest of
// handed (positions of events it handed over, in seq order, as many recent
// ones as the caller kept) that the table still holds with the same
// event_id, and returns it. The events after it are read again: those the
// table lost are gone, or come again under other seqs with the event_ids
// they had, so a reader that deduplicates on event_id applies each step
// once. When none of handed is held as handed, it moves to the table's last
// event before the oldest of them (or to the start).
func (f *Follower) Rewind(ctx context.Context, handed []Position) (Position, error) {
	seqs := make([]int64, len(handed))
	for i, p := range handed {
		seqs[i] = p.Seq
	}
	rows, err := f.pool.Query(ctx, `SELECT seq, event_id FROM payment_events WHERE seq = ANY($1)`, seqs)
	if err != nil {
		return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
	}
	held := map[int64]string{}
	for rows.Next() {
		var (
			seq int64
			id  string
		)
		if err := rows.Scan(&seq, &id); err != nil {
			rows.Close()
			return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
		}
		held[seq] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
	}
	to := Position{}
	for i := len(handed) - 1; i >= 0; i-- {
		if held[handed[i].Seq] == handed[i].EventID && handed[i].EventID != "" {
			to = handed[i]
			break
		}
	}
	if to.Seq == 0 && len(handed) > 0 && handed[0].Seq > 1 {
		var last int64
		if err := f.pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM payment_events WHERE seq < $1`, handed[0].Seq).Scan(&last); err != nil {
			return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
		}
		if to, err = positionAt(ctx, f.pool, last); err != nil {
			return Position{}, err
		}
	}
	f.mu.Lock()
	f.pos = to
	f.mu.Unlock()
	return to, nil
}
