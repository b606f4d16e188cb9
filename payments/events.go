package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventsChannel is the channel a transaction that records events notifies
// on commit, with the payload {"seq":N} (N its last event): a hint to read
// payment_events, never the data itself.
const EventsChannel = "burnpoller_events"

// Event kinds.
const (
	KindSeen      = "seen"
	KindRetracted = "retracted"
	KindConfirmed = "confirmed"
)

// Kinds are the event kinds, in the order of a burn's life.
var Kinds = []string{KindSeen, KindRetracted, KindConfirmed}

// Event is one row of payment_events: a step in a burn's life. Its JSON
// form is what webhooks POST and `poller events --json` prints: every
// column, the amount as a decimal string.
type Event struct {
	Seq         int64     `json:"seq"`
	EventID     string    `json:"event_id"`
	Kind        string    `json:"kind"`
	ChainID     uint64    `json:"chain_id"`
	Contract    string    `json:"contract"`
	TxHash      string    `json:"tx_hash"`
	LogIndex    uint32    `json:"log_index"`
	BlockNumber int64     `json:"block_number"`
	BlockHash   string    `json:"block_hash"`
	Payer       string    `json:"payer"`
	Digest      string    `json:"digest"`
	Amount      *big.Int  `json:"-"`
	BurnedAt    time.Time `json:"burned_at"`
	// PaymentID is the payment a confirmed event recorded; 0 otherwise.
	PaymentID int64     `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	// Reason says why the event was recorded when the chain did not cause
	// it (a retracted for a contract its group stopped following); "" when
	// it did.
	Reason string `json:"reason,omitempty"`
	// History is the event's history_hash in hex (migration 18): the hash
	// of the event log up to the end of the commit that numbered it. A
	// reader that finds it unchanged at this seq later knows that every
	// event below is the one it saw; "" for events numbered before
	// migration 18. Not in the JSON form.
	History string `json:"-"`
}

// EventID is the id of the first occurrence of a step: a burn's kind at a
// position, <chain_id>:<tx_hash>:<log_index>:<kind>:<block_hash>. An event
// is recorded with it the first time; the n-th time the same burn takes the
// same step at the same position (seen again at a block the chain came back
// to, confirmed again after an orphaning), with <EventID>:<n>, n counted
// when the event commits from the events recorded before it. So an id names
// one occurrence: a receiver that applies each id once applies each step
// once, and an occurrence recorded again after an asynchronous failover
// lost it (the promoted standby holds a prefix of the events) gets the id
// it had.
func EventID(chainID uint64, txHash string, logIndex uint32, kind, blockHash string) string {
	return strconv.FormatUint(chainID, 10) + ":" + txHash + ":" + strconv.FormatUint(uint64(logIndex), 10) + ":" + kind + ":" + blockHash
}

// MarshalJSON writes the event with its amount as a decimal string and
// payment_id null unless confirmed.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event // drops the method, keeps the tags
	var (
		amount string
		pid    *int64
	)
	if e.Amount != nil {
		amount = e.Amount.String()
	}
	if e.PaymentID != 0 {
		pid = &e.PaymentID
	}
	return json.Marshal(struct {
		plain
		Amount    string `json:"amount"`
		PaymentID *int64 `json:"payment_id"`
	}{plain(e), amount, pid})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	var j struct {
		plain
		Amount    string `json:"amount"`
		PaymentID *int64 `json:"payment_id"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Event(j.plain)
	if j.Amount != "" {
		a, ok := new(big.Int).SetString(j.Amount, 10)
		if !ok || a.Sign() < 0 {
			return fmt.Errorf("amount %q is not a uint256", j.Amount)
		}
		e.Amount = a
	}
	if j.PaymentID != nil {
		e.PaymentID = *j.PaymentID
	}
	return nil
}

// EventColumns are the columns of payment_events ScanEvent reads, in its
// order: the one way an event is read, here and by consumers.
const EventColumns = `seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number, block_hash,
	payer, digest, amount::text, burned_at, coalesce(payment_id, 0), created_at, coalesce(reason, ''),
	coalesce(encode(history_hash, 'hex'), '')`

const eventColumns = EventColumns

// ScanEvent reads one row that selected EventColumns, then any extra
// columns into extra.
func ScanEvent(row pgx.Row, extra ...any) (Event, error) {
	var (
		e       Event
		chainID int64
		amount  string
	)
	dest := append([]any{&e.Seq, &e.EventID, &e.Kind, &chainID, &e.Contract, &e.TxHash, &e.LogIndex, &e.BlockNumber,
		&e.BlockHash, &e.Payer, &e.Digest, &amount, &e.BurnedAt, &e.PaymentID, &e.CreatedAt, &e.Reason, &e.History}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Event{}, fmt.Errorf("reading events: %w", interpret(err))
	}
	e.ChainID = uint64(chainID)
	a, ok := new(big.Int).SetString(amount, 10)
	if !ok {
		return Event{}, fmt.Errorf("reading events: amount %q of event %d is not an integer", amount, e.Seq)
	}
	e.Amount = a
	return e, nil
}

// Events reads up to limit events with seq above after, in seq order.
// Repeating it from the last seq read never misses an event: seqs are
// given in commit order, without gaps.
func (s *Store) Events(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM payment_events
		WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("reading events after %d: %w", after, interpret(err))
	}
	return scanEvents(rows)
}

// EventsBySeq reads the events with the given seqs, in seq order.
func (s *Store) EventsBySeq(ctx context.Context, seqs []int64) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM payment_events
		WHERE seq = ANY($1) ORDER BY seq`, seqs)
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", interpret(err))
	}
	return scanEvents(rows)
}

// LastSeq is the highest seq committed (0 before the first event).
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT last_seq FROM payment_event_seq`).Scan(&n); err != nil {
		return 0, fmt.Errorf("reading the last event seq: %w", interpret(err))
	}
	return n, nil
}

func scanEvents(rows pgx.Rows) ([]Event, error) {
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e, err := ScanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading events: %w", interpret(err))
	}
	return out, nil
}
