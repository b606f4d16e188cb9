package consume

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/burnpoller/burnpoller/db/migrations"
)

var (
	// ErrDiverged means a position is not in payment_events as recorded:
	// the table ends below it, or holds another event at its seq. Run and
	// RunAtLeastOnce stop with it, and Follower.Next returns it, as a
	// *DivergedError; nothing is skipped.
	ErrDiverged = errors.New("position not in payment_events as recorded")
	// ErrGap means payment_events lacks seqs below its last one, which the
	// writers never leave: the table was edited by hand.
	ErrGap = errors.New("gap in payment_events seqs")
	// ErrNoOffset means a consumer's row in consumer_offsets is gone: while
	// it runs, or, at a start, after the name was registered before
	// (consumer_names remembers every name). It stops rather than start
	// again from its first event, at every start, until the offset is set
	// with Reset.
	ErrNoOffset = errors.New("consumer offset row is gone")
	// ErrNotOwner means a consumer name belongs to another role: each role
	// sees and moves only the offsets it created (migration 20).
	ErrNotOwner = errors.New("consumer name belongs to another role")
	// ErrNoEvent means a seq asked for is not in payment_events.
	ErrNoEvent = errors.New("no such event")
	// ErrBeyondHanded means Follower.Rewind cannot tell where
	// payment_events stopped holding what was handed over: none of the
	// positions it was given is held with the history it was handed with.
	// It does not guess; start a new Follower from a position you know
	// the service has applied, and deduplicate on event_id.
	ErrBeyondHanded = errors.New("payment_events diverged below every position handed over")
	// ErrTxOwned is what the transaction handed to a Handler returns from
	// Commit and Rollback: the consumer commits it, with the offset.
	ErrTxOwned = errors.New("the consumer commits or rolls back this transaction, not its handler")
)

// DivergedError is a position that payment_events no longer holds as
// recorded (see the package doc, "Tail loss").
type DivergedError struct {
	// Name is the consumer's name; "" for a Follower.
	Name string
	// At is the position as recorded.
	At Position
	// Found is the event_id the table holds at At.Seq; "" if none.
	Found string
	// FoundHistory is the history_hash (hex) the table holds at At.Seq;
	// "" if none.
	FoundHistory string
	// Last is the table's last seq.
	Last int64
}

func (e *DivergedError) Error() string {
	who := "follower"
	if e.Name != "" {
		who = fmt.Sprintf("consumer %q", e.Name)
	}
	switch {
	case e.Found == "" && e.Last < e.At.Seq:
		return fmt.Sprintf("%s: its position, seq %d, is ahead of payment_events, whose last seq is %d: the table lost events after the position was stored (a failover or restore); refusing to skip — see the consume package doc, \"Tail loss\"",
			who, e.At.Seq, e.Last)
	case e.Found == "":
		return fmt.Sprintf("%s: payment_events has no seq %d (its last is %d), the position recorded; refusing to skip — see the consume package doc, \"Tail loss\"",
			who, e.At.Seq, e.Last)
	case e.Found == e.At.EventID || e.At.EventID == "":
		return fmt.Sprintf("%s: payment_events seq %d is still event %s, but the events up to it are not the ones read before (history %s, not %s): events below it were numbered again after the position was read (a failover or restore); refusing to skip — see the consume package doc, \"Tail loss\"",
			who, e.At.Seq, e.Found, short(e.FoundHistory), short(e.At.History))
	default:
		return fmt.Sprintf("%s: payment_events seq %d is event %s, not %s as recorded with the position: the events were numbered again after the position was stored (a failover or restore); refusing to skip — see the consume package doc, \"Tail loss\"",
			who, e.At.Seq, e.Found, e.At.EventID)
	}
}

// short is the first 16 hex digits of a history hash, enough to tell two
// apart in a message.
func short(h string) string {
	if h == "" {
		return "none"
	}
	return h[:min(16, len(h))]
}

// Unwrap makes errors.Is(err, ErrDiverged) hold.
func (e *DivergedError) Unwrap() error { return ErrDiverged }

// Permanent marks a handler's error as one that retrying cannot cure: the
// batch is rolled back (Run) and the consumer stops, returning it.
// Without it, a handler's error is retried after a back-off, forever.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// handlerError is an error a handler returned; its SQLSTATE, if any, is
// the handler's business, not a sign of the consumer's schema.
type handlerError struct {
	seq int64
	err error
}

func (h *handlerError) Error() string { return fmt.Sprintf("handling event %d: %v", h.seq, h.err) }
func (h *handlerError) Unwrap() error { return h.err }

// Schema versions the package needs.
const (
	eventsVersion  = 18 // payment_events with history_hash
	offsetsVersion = 20 // consumer_offsets with history_hash and owner, consumer_names
)

// checkSchema refuses a database below version need with an error
// wrapping migrations.ErrPending, which says to run `poller migrate`.
func checkSchema(ctx context.Context, q migrations.Querier, need int32) error {
	v, err := migrations.Current(ctx, q)
	if err != nil {
		return err
	}
	if v < need {
		return fmt.Errorf("%w (database at version %d, consumers need %d or later)", migrations.ErrPending, v, need)
	}
	return nil
}

// interpret converts the SQLSTATEs of the package's own statements that
// mean a missing or older schema to migrations.ErrPending.
func interpret(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42P01", "42703", "42883": // undefined table, column, function
		return fmt.Errorf("%w: %s", migrations.ErrPending, pgErr.Message)
	}
	return err
}

// fatal reports whether err stops the consumer rather than being retried.
func fatal(err error) bool {
	var perm *permanentError
	if errors.As(err, &perm) {
		return true
	}
	var h *handlerError
	if errors.As(err, &h) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege: a grant is missing
		return true
	}
	for _, e := range []error{migrations.ErrPending, ErrDiverged, ErrGap, ErrNoOffset, ErrNoEvent, ErrPooler, ErrNotOwner} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
