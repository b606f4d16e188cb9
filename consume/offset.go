package consume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/database"
)

// The offset row of a consumer name in consumer_offsets (migration 11):
// last_seq and the event_id at it, and, for at-least-once consumers, a
// lease. Every statement here locks that row only, never anything a writer
// of payment_events needs.

// register creates name's offset row at the start position when the name
// never had one. A name registered before whose row is gone (deleted by
// hand, a restore, a script) is ErrNoOffset, at every start, until its
// offset is set again (Reset): starting it again from its start position
// would hand over, and credit, every event again.
func register(ctx context.Context, pool *pgxpool.Pool, name string, start int64, owner string) error {
	exists, registered, err := nameOf(ctx, pool, name)
	if err != nil {
		return err
	}
	switch {
	case exists:
		return nil
	case registered != nil:
		return fmt.Errorf("%w: the name was registered on %s and its offset row has been deleted since; refusing to start again from its start position, which would hand over every event again: set the offset to the last event the service applied with consume.Reset (see the consume package doc, \"Offsets\")",
			ErrNoOffset, registered.at.UTC().Format(time.RFC3339))
	}
	pos, err := positionAt(ctx, pool, start)
	if err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	// Two consumers registering at once: the first row stands. The row's
	// trigger records the name in consumer_names, with its owner: the
	// connecting role unless Owner names another.
	if _, err := pool.Exec(ctx, `INSERT INTO consumer_offsets (name, last_seq, event_id, history_hash, owner)
		VALUES ($1, $2, $3, $4, coalesce($5, current_user))
		ON CONFLICT (name) DO NOTHING`, name, pos.Seq, nullable(pos.EventID), history(pos), nullable(owner)); err != nil {
		return fmt.Errorf("registering: %w", notOwner(interpret(err), name, owner))
	}
	return nil
}

// registration is a name's row in consumer_names.
type registration struct {
	at    time.Time
	owner string // "" for none
}

// nameOf says whether name has an offset row this role sees, and how it
// was registered (nil: never). A name registered for a role this role is
// not a member of is ErrNotOwner. Row-level security (migration 20) shows
// a role only the offset rows of roles it is a member of; the names, with
// their owners, it sees whole.
func nameOf(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, name string) (exists bool, registered *registration, err error) {
	var (
		at    *time.Time
		owner string
		mine  bool
	)
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM consumer_offsets WHERE name = $1),
		n.registered_at, coalesce(n.owner, ''), n.owner IS NULL OR burnpoller_is_member(n.owner)
		FROM (SELECT 1) one LEFT JOIN consumer_names n ON n.name = $1`, name).Scan(&exists, &at, &owner, &mine); err != nil {
		return false, nil, fmt.Errorf("reading the offset: %w", interpret(err))
	}
	if at == nil {
		return exists, nil, nil
	}
	if !mine {
		return false, nil, fmt.Errorf("%w: consumer name %q was registered for role %q, of which this role is not a member; a consumer reads and moves only its own role's offsets (see docs/consuming.md)",
			ErrNotOwner, name, owner)
	}
	return exists, &registration{at: *at, owner: owner}, nil
}

// notOwner turns a row-level security refusal (42501) of a write of name's
// offset into ErrNotOwner.
func notOwner(err error, name, owner string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" || !strings.Contains(pgErr.Message, "row-level security") {
		return err
	}
	if owner == "" {
		owner = "this role"
	} else {
		owner = fmt.Sprintf("role %q", owner)
	}
	return fmt.Errorf("%w: consumer name %q may not be written for %s (it is another role's, or this role is not a member of the owner it names): %w",
		ErrNotOwner, name, owner, err)
}

// offsetColumns are an offset row's position, as scanPosition reads them.
const offsetColumns = `last_seq, event_id, coalesce(encode(history_hash, 'hex'), '')`

// history is pos's history as the bytea column takes it: nil for none.
func history(pos Position) []byte {
	if pos.History == "" {
		return nil
	}
	b, err := hex.DecodeString(pos.History)
	if err != nil {
		return nil
	}
	return b
}

// lockOffset locks name's offset row for the rest of tx and returns the
// offset. ok is false when another consumer of the name holds the row (a
// batch of Run) or a live lease (RunAtLeastOnce): tx then holds nothing.
// SKIP LOCKED: a consumer never queues behind another for the row.
func lockOffset(ctx context.Context, tx pgx.Tx, name string) (pos Position, ok bool, err error) {
	var (
		id     *string
		leased bool
	)
	err = tx.QueryRow(ctx, `SELECT `+offsetColumns+`, coalesce(lease_until > now(), false)
		FROM consumer_offsets WHERE name = $1 FOR UPDATE SKIP LOCKED`, name).Scan(&pos.Seq, &id, &pos.History, &leased)
	if errors.Is(err, pgx.ErrNoRows) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("locking the offset: %w", interpret(err))
	}
	pos.EventID = deref(id)
	return pos, !leased, nil
}

// storeOffset moves the offset tx holds (lockOffset) to pos.
func storeOffset(ctx context.Context, tx pgx.Tx, name string, pos Position) error {
	if _, err := tx.Exec(ctx, `UPDATE consumer_offsets SET last_seq = $2, event_id = $3, history_hash = $4, updated_at = now() WHERE name = $1`,
		name, pos.Seq, nullable(pos.EventID), history(pos)); err != nil {
		return fmt.Errorf("storing the offset: %w", interpret(err))
	}
	return nil
}

// peekOffset reads name's offset without a lock, with the table's last
// seq, for a consumer on standby. A missing row is ErrNoOffset.
func peekOffset(ctx context.Context, pool *pgxpool.Pool, name string) (Progress, error) {
	p := Progress{Name: name, Standby: true}
	var id *string
	err := pool.QueryRow(ctx, `SELECT `+offsetColumns+`, (SELECT coalesce(max(seq), 0) FROM payment_events)
		FROM consumer_offsets WHERE name = $1`, name).Scan(&p.Offset.Seq, &id, &p.Offset.History, &p.Last)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("%w (deleted?): refusing to start again from its start position; restore it, or set it with consume.Reset", ErrNoOffset)
	}
	if err != nil {
		return p, fmt.Errorf("reading the offset: %w", interpret(err))
	}
	p.Offset.EventID = deref(id)
	return p, nil
}

// claim takes or renews name's lease for owner, for d, and returns the
// offset; ok is false while another owner's lease is live or a batch of
// Run holds the row.
func claim(ctx context.Context, pool *pgxpool.Pool, name, owner string, d time.Duration) (pos Position, ok bool, err error) {
	var id *string
	err = pool.QueryRow(ctx, `
		WITH o AS (SELECT name FROM consumer_offsets WHERE name = $1 FOR UPDATE SKIP LOCKED)
		UPDATE consumer_offsets c SET lease_owner = $2, lease_until = clock_timestamp() + $3 * interval '1 millisecond'
		FROM o
		WHERE c.name = o.name AND (c.lease_owner IS NULL OR c.lease_owner = $2 OR c.lease_until <= clock_timestamp())
		RETURNING c.last_seq, c.event_id, coalesce(encode(c.history_hash, 'hex'), '')`, name, owner, d.Milliseconds()).Scan(&pos.Seq, &id, &pos.History)
	if errors.Is(err, pgx.ErrNoRows) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("claiming the name: %w", interpret(err))
	}
	pos.EventID = deref(id)
	return pos, true, nil
}

// storeLeased moves name's offset from `from` to pos and renews the lease,
// if owner still holds it; held is false when it does not (the lease ran
// out and another consumer took the name over, or Reset cleared it).
func storeLeased(ctx context.Context, pool *pgxpool.Pool, name, owner string, from, pos Position, d time.Duration) (held bool, err error) {
	tag, err := pool.Exec(ctx, `UPDATE consumer_offsets
		SET last_seq = $4, event_id = $5, history_hash = $7, updated_at = now(),
		    lease_until = clock_timestamp() + $6 * interval '1 millisecond'
		WHERE name = $1 AND lease_owner = $2 AND last_seq = $3`,
		name, owner, from.Seq, pos.Seq, nullable(pos.EventID), d.Milliseconds(), history(pos))
	if err != nil {
		return false, fmt.Errorf("storing the offset: %w", interpret(err))
	}
	return tag.RowsAffected() == 1, nil
}

// release gives up owner's lease on name, so that a consumer on standby
// takes over at once.
func release(ctx context.Context, pool *pgxpool.Pool, name, owner string) error {
	if _, err := pool.Exec(ctx, `UPDATE consumer_offsets SET lease_owner = NULL, lease_until = NULL
		WHERE name = $1 AND lease_owner = $2`, name, owner); err != nil {
		return fmt.Errorf("releasing the lease: %w", interpret(err))
	}
	return nil
}

// resetIdleTimeout is how long Reset's transaction may sit idle on the
// server before Postgres ends its session (and the transaction with it).
var resetIdleTimeout = DefaultBatchTimeout

// Reset sets consumer name's offset to event seq (0: before the first
// event), recorded with the event_id and history payment_events holds at
// seq, and clears its lease; it creates the row if the name has none. It
// waits for a batch of the name in flight to end. It moves the offset
// wherever it is told, back or forward: use it after a DivergedError once
// you know which events the handler's effects already include (see the
// package doc, "Tail loss"), or after ErrNoOffset, to the last event the
// service applied. A seq the table does not hold is ErrNoEvent. Its
// transaction may sit idle on the server for at most DefaultBatchTimeout:
// Postgres ends the session of a caller frozen in it, and what it wrote
// with it.
func Reset(ctx context.Context, pool *pgxpool.Pool, name string, seq int64) error {
	if name == "" {
		return errors.New("consume: empty consumer name")
	}
	if seq < 0 {
		return fmt.Errorf("consume: seq %d is negative", seq)
	}
	// Bounded from BEGIN on, as every writer's transaction: a caller frozen
	// after its write would otherwise keep the name's offset row locked,
	// and every consumer of the name waiting, for as long as its
	// connection lives. Its wait for a batch in flight is not bounded here:
	// the batch's own bounds end it.
	opts := database.BeginBounded(database.Bound{Setting: "idle_in_transaction_session_timeout", Limit: resetIdleTimeout})
	return pgx.BeginTxFunc(ctx, pool, opts, func(tx pgx.Tx) error {
		pos, err := positionAt(ctx, tx, seq)
		if err != nil {
			return fmt.Errorf("resetting consumer %q: %w", name, err)
		}
		// A row made again keeps the owner the name was registered for.
		_, registered, err := nameOf(ctx, tx, name)
		if err != nil {
			return fmt.Errorf("resetting consumer %q: %w", name, err)
		}
		owner := ""
		if registered != nil {
			owner = registered.owner
		}
		if _, err := tx.Exec(ctx, `INSERT INTO consumer_offsets (name, last_seq, event_id, history_hash, owner)
			VALUES ($1, $2, $3, $4, coalesce($5, current_user))
			ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, event_id = excluded.event_id,
			    history_hash = excluded.history_hash, lease_owner = NULL, lease_until = NULL, updated_at = now()`,
			name, pos.Seq, nullable(pos.EventID), history(pos), nullable(owner)); err != nil {
			return fmt.Errorf("resetting consumer %q: %w", name, notOwner(interpret(err), name, owner))
		}
		return nil
	})
}

// Offset returns consumer name's stored offset; ErrNoOffset if the name has
// none.
func Offset(ctx context.Context, pool *pgxpool.Pool, name string) (Position, error) {
	var (
		p  Position
		id *string
	)
	err := pool.QueryRow(ctx, `SELECT `+offsetColumns+` FROM consumer_offsets WHERE name = $1`, name).Scan(&p.Seq, &id, &p.History)
	if errors.Is(err, pgx.ErrNoRows) {
		return Position{}, fmt.Errorf("consumer %q: %w", name, ErrNoOffset)
	}
	if err != nil {
		return Position{}, fmt.Errorf("reading the offset of consumer %q: %w", name, interpret(err))
	}
	p.EventID = deref(id)
	return p, nil
}

// PositionAt returns the position of event seq (the zero Position for 0);
// ErrNoEvent if payment_events does not hold it.
func PositionAt(ctx context.Context, pool *pgxpool.Pool, seq int64) (Position, error) {
	if seq < 0 {
		return Position{}, fmt.Errorf("consume: seq %d is negative", seq)
	}
	return positionAt(ctx, pool, seq)
}

// LastPosition returns the position of the last event committed (the zero
// Position when there is none): a Follower started there is handed the
// events committed from then on.
func LastPosition(ctx context.Context, pool *pgxpool.Pool) (Position, error) {
	return positionAt(ctx, pool, -1)
}

// leaseOwner names this process's lease in consumer_offsets.lease_owner.
func leaseOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
