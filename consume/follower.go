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
// to run `poller migrate` when payment_events is missing) and the pool
// (ErrPooler through a transaction pooler that cannot carry its statements)
// and starts listening for notifications, until Stop or until ctx ends. It
// returns once started.
func (f *Follower) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("consume: follower started twice")
	}
	if err := checkSchema(ctx, f.pool, eventsVersion); err != nil {
		return err
	}
	listen, err := checkPool(ctx, f.pool, f.cfg)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	f.started, f.cancel = true, cancel
	f.waker.start(lctx, listen)
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

// Rewind moves a follower that met a *DivergedError back to just before
// the oldest of handed (positions of events it handed over, in seq order,
// as many recent ones as the caller kept: PositionOf of each event) that
// the table no longer holds as handed, and returns where it moved. A
// position is held as handed when the table holds the same event_id at its
// seq with the same history_hash: then every event below it is the one
// handed, so Rewind goes to the newest such position, the last that
// provably precedes every change. The events after it are read again:
// those the table lost are gone, or come again under other seqs with the
// event_ids they had, so a reader that deduplicates on event_id applies
// each step once, and one numbered meanwhile (another group's burn at a
// lost seq) is handed over. With no handed positions it goes back to the
// start. When none is held as handed and the oldest is not the first
// event, Rewind cannot tell how far back the table changed: it refuses with
// ErrBeyondHanded and the follower stays where it was.
func (f *Follower) Rewind(ctx context.Context, handed []Position) (Position, error) {
	seqs := make([]int64, len(handed))
	for i, p := range handed {
		seqs[i] = p.Seq
	}
	rows, err := f.pool.Query(ctx, `SELECT seq, event_id, coalesce(encode(history_hash, 'hex'), '') FROM payment_events WHERE seq = ANY($1)`, seqs)
	if err != nil {
		return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
	}
	held := map[int64]Position{}
	for rows.Next() {
		var p Position
		if err := rows.Scan(&p.Seq, &p.EventID, &p.History); err != nil {
			rows.Close()
			return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
		}
		held[p.Seq] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
	}
	to, ok := rewindTo(handed, held)
	if !ok {
		return Position{}, fmt.Errorf("%w: none of the %d positions handed over (seqs %d to %d) is in payment_events with the event and history it was handed with; start again from a position the service knows it applied, and deduplicate on event_id",
			ErrBeyondHanded, len(handed), handed[0].Seq, handed[len(handed)-1].Seq)
	}
	f.mu.Lock()
	f.pos = to
	f.mu.Unlock()
	return to, nil
}

// rewindTo is where Rewind goes, given the handed positions and what the
// table holds at their seqs: the newest handed position held with its
// event and history (every event below it is then as handed); the start
// when nothing was handed, or when the oldest handed, not held, is the
// first event; otherwise nowhere (ok false). A position without a history
// (numbered before migration 18) proves only itself, not what is below.
func rewindTo(handed []Position, held map[int64]Position) (to Position, ok bool) {
	if len(handed) == 0 {
		return Position{}, true
	}
	for i := len(handed) - 1; i >= 0; i-- {
		p := handed[i]
		if h, found := held[p.Seq]; found && p.EventID != "" && p.History != "" && h == p {
			return p, true
		}
	}
	if handed[0].Seq == 1 {
		return Position{}, true
	}
	return Position{}, false
}
