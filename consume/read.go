package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/payments"
)

// Position is a place in payment_events: the last event read or handled,
// named by its seq and its event_id, and, once read from the table, its
// history_hash. The event_id tells that event apart from another one
// numbered at the same seq after a failover lost the table's tail; the
// history tells whether any event below it changed, even where the same
// event came back at the same seq. The zero Position is before the first
// event.
type Position struct {
	Seq int64
	// EventID is the event's id; "" for the zero Position, or when not
	// known (then only the seq is checked: the table must reach it).
	EventID string
	// History is the event's history_hash in hex as read
	// (payments.Event.History); "" when not known (a position stored in
	// consumer_offsets, an event numbered before migration 18): then only
	// the event_id is checked.
	History string
}

// PositionOf is the position of an event read from payment_events (one a
// Follower handed over, say): what Rewind is given.
func PositionOf(e payments.Event) Position {
	return Position{Seq: e.Seq, EventID: e.EventID, History: e.History}
}

// querier is what a read needs: the consumer's transaction or a pool.
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// filter selects the events handed over; a nil slice selects every value.
type filter struct {
	kinds     []string
	chains    []int64
	contracts []string
}

// window is one read: the events after a position, up to a number of seqs.
type window struct {
	// events are the events the filter selects, in seq order, each with
	// its position.
	events []payments.Event
	// end is the last event of the window, selected or not; the starting
	// position when the window is empty. A consumer that has handled every
	// selected event moves its offset to end.
	end Position
	// last is the table's last seq as read.
	last int64
	// full says the window reached its size: more may be committed already.
	full bool
}

// selected is the filter as SQL over $3 (kinds), $4 (chain ids) and $5
// (contracts); NULL selects every value.
const selected = `($3::text[] IS NULL OR kind = ANY($3)) AND ($4::bigint[] IS NULL OR chain_id = ANY($4))
	AND ($5::text[] IS NULL OR contract = ANY($5))`

// readWindow checks that from is still in payment_events as recorded, then
// reads the events after it, at most size seqs. It is the one reader of the
// package: Run, RunAtLeastOnce and Follower differ only in where the
// position is kept and what they do with the events.
//
// Seqs are gap-free in commit order, so the window (from, from+size] holds
// every event up to its end: an event committed later gets a higher seq.
// Events the filter drops never cross the wire, except the window's last,
// which carries the position to move to.
func readWindow(ctx context.Context, q querier, from Position, size int, f filter) (window, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT e.event_id, coalesce(encode(e.history_hash, 'hex'), ''), (SELECT coalesce(max(seq), 0) FROM payment_events)
		FROM (SELECT 1) one LEFT JOIN payment_events e ON e.seq = $1`, from.Seq)
	b.Queue(`SELECT `+payments.EventColumns+`, `+selected+` FROM payment_events
		WHERE seq > $1 AND seq <= $1 + $2
		  AND (`+selected+` OR seq = (SELECT max(seq) FROM payment_events WHERE seq > $1 AND seq <= $1 + $2))
		ORDER BY seq`, from.Seq, size, f.kinds, f.chains, f.contracts)
	br := q.SendBatch(ctx, b)
	defer br.Close()

	w := window{end: from}
	var (
		at      *string
		history string
	)
	if err := br.QueryRow().Scan(&at, &history, &w.last); err != nil {
		return window{}, fmt.Errorf("reading payment_events at seq %d: %w", from.Seq, interpret(err))
	}
	if err := diverged(from, at, history, w.last); err != nil {
		return window{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return window{}, fmt.Errorf("reading payment_events after seq %d: %w", from.Seq, interpret(err))
	}
	defer rows.Close()
	for rows.Next() {
		e, sel, err := scanEvent(rows)
		if err != nil {
			return window{}, err
		}
		if sel {
			w.events = append(w.events, e)
		}
		w.end = PositionOf(e)
	}
	if err := rows.Err(); err != nil {
		return window{}, fmt.Errorf("reading payment_events after seq %d: %w", from.Seq, interpret(err))
	}
	if w.end == from && w.last > from.Seq {
		// Seqs are given without gaps; a table with one was edited by hand.
		return window{}, fmt.Errorf("%w: payment_events holds seq %d but none of seqs %d..%d", ErrGap, w.last, from.Seq+1, from.Seq+int64(size))
	}
	w.last = max(w.last, w.end.Seq) // the two statements read at different moments
	w.full = w.end.Seq >= from.Seq+int64(size) || w.end.Seq < w.last
	return w, nil
}

// diverged checks the position against what the table holds at its seq:
// the event, and, when the position knows it, the history below it.
func diverged(from Position, at *string, history string, last int64) error {
	if from.Seq == 0 {
		return nil
	}
	found := ""
	if at != nil {
		found = *at
	}
	if at == nil || (from.EventID != "" && found != from.EventID) || (from.History != "" && history != from.History) {
		return &DivergedError{At: from, Found: found, FoundHistory: history, Last: last}
	}
	return nil
}

func scanEvent(rows pgx.Rows) (payments.Event, bool, error) {
	var sel bool
	e, err := payments.ScanEvent(rows, &sel)
	return e, sel, err
}

// positionAt returns the position of event seq (the zero Position for 0),
// or, for seq -1, of the last event.
func positionAt(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, seq int64) (Position, error) {
	if seq == 0 {
		return Position{}, nil
	}
	p := Position{Seq: seq}
	var err error
	if seq < 0 {
		err = q.QueryRow(ctx, `SELECT seq, event_id, coalesce(encode(history_hash, 'hex'), '') FROM payment_events
			ORDER BY seq DESC LIMIT 1`).Scan(&p.Seq, &p.EventID, &p.History)
		if errors.Is(err, pgx.ErrNoRows) {
			return Position{}, nil
		}
	} else {
		err = q.QueryRow(ctx, `SELECT event_id, coalesce(encode(history_hash, 'hex'), '') FROM payment_events WHERE seq = $1`,
			seq).Scan(&p.EventID, &p.History)
		if errors.Is(err, pgx.ErrNoRows) {
			return Position{}, fmt.Errorf("%w: payment_events has no seq %d", ErrNoEvent, seq)
		}
	}
	if err != nil {
		return Position{}, fmt.Errorf("reading payment_events: %w", interpret(err))
	}
	return p, nil
}
