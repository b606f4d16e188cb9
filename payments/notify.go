package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// NotifyChannel is the channel a transaction that inserts payments notifies
// on commit; LISTEN burnpoller_payments to react without polling.
const NotifyChannel = "burnpoller_payments"

// notifyDetailMax is how many payments a notification lists in full; beyond
// it, the count and the id range only (a payload must stay under 8000 bytes).
const notifyDetailMax = 10

// Notification is the JSON payload on NotifyChannel: one per committed
// transaction that inserted payments. Payments lists them when Count is at
// most 10. The ids of this transaction's payments lie in [FirstID, LastID];
// a concurrent backfill may have ids inside that span too, so consumers
// should read by id and be idempotent.
type Notification struct {
	ChainID  uint64         `json:"chain_id"`
	Contract string         `json:"contract"`
	Count    int            `json:"count"`
	FirstID  int64          `json:"first_id"`
	LastID   int64          `json:"last_id"`
	Payments []NotifiedItem `json:"payments,omitempty"`
}

// NotifiedItem is one payment in a Notification.
type NotifiedItem struct {
	ID          int64  `json:"id"`
	TxHash      string `json:"tx_hash"`
	LogIndex    uint32 `json:"log_index"`
	BlockNumber int64  `json:"block_number"`
	Payer       string `json:"payer"`
	Digest      string `json:"digest"`
	Amount      string `json:"amount"`
}

// Add accumulates, across the ranges of a transaction, what its
// notification says: a count and an id span, and the payments themselves
// while they are few. Add as ranges are inserted; nothing else is kept.
func (n *Notification) Add(inserted []Inserted) {
	for _, p := range inserted {
		if n.Count == 0 {
			n.ChainID, n.Contract, n.FirstID, n.LastID = p.ChainID, p.Contract, p.ID, p.ID
		}
		n.Count++
		n.FirstID, n.LastID = min(n.FirstID, p.ID), max(n.LastID, p.ID)
		if n.Count <= notifyDetailMax {
			n.Payments = append(n.Payments, NotifiedItem{
				ID: p.ID, TxHash: p.TxHash, LogIndex: p.LogIndex, BlockNumber: p.BlockNumber,
				Payer: p.Payer, Digest: p.Digest, Amount: p.Amount.String(),
			})
		}
	}
}

// Notify queues, for commit, the notification n. It does nothing when n
// counts no payment: duplicates notify nobody.
func (t *Tx) Notify(ctx context.Context, n Notification) error {
	if n.Count == 0 {
		return nil
	}
	if n.Count > notifyDetailMax {
		n.Payments = nil
	}
	payload, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if _, err := t.tx.Exec(ctx, `SELECT pg_notify($1, $2)`, NotifyChannel, string(payload)); err != nil {
		return fmt.Errorf("notifying %s: %w", NotifyChannel, interpret(err))
	}
	return nil
}

// Hook is a validated PAYMENT_HOOK_SQL statement, run for every newly
// inserted payment in the transaction that inserts it. Its parameters:
//
//	$1 id bigint, $2 chain_id bigint, $3 contract text, $4 tx_hash text,
//	$5 log_index integer, $6 block_number bigint, $7 block_hash text,
//	$8 payer text, $9 digest text, $10 amount numeric, $11 burned_at timestamptz
//
// It may use any of them, in any order.
type Hook struct {
	sql string
}

// hookParams are the types of the hook's parameters, declared up front so a
// statement may use any subset of them.
var hookParams = []uint32{
	pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.Int4OID, pgtype.Int8OID,
	pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.NumericOID, pgtype.TimestamptzOID,
}

// ErrBadHook means PAYMENT_HOOK_SQL does not prepare.
var ErrBadHook = errors.New("PAYMENT_HOOK_SQL is not a valid statement")

// hookVerbs are the statements a hook may be: data changes and queries.
// Transaction control or SET would end the locked transaction or lift its
// timeouts.
var hookVerbs = []string{"insert", "update", "delete", "merge", "with", "select", "call"}

// firstWord returns the lowercased first keyword of sql, past comments.
func firstWord(sql string) string {
	for {
		sql = strings.TrimSpace(sql)
		switch {
		case strings.HasPrefix(sql, "--"):
			if i := strings.IndexByte(sql, '\n'); i >= 0 {
				sql = sql[i+1:]
				continue
			}
			return ""
		case strings.HasPrefix(sql, "/*"):
			if i := strings.Index(sql, "*/"); i >= 0 {
				sql = sql[i+2:]
				continue
			}
			return ""
		}
		end := strings.IndexFunc(sql, func(r rune) bool { return !unicode.IsLetter(r) })
		if end < 0 {
			end = len(sql)
		}
		return strings.ToLower(sql[:end])
	}
}

// PrepareHook validates sql by preparing it, and returns the hook.
func (s *Store) PrepareHook(ctx context.Context, sql string) (*Hook, error) {
	if w := firstWord(sql); !slices.Contains(hookVerbs, w) {
		return nil, fmt.Errorf("%w: it must be an INSERT, UPDATE, DELETE, MERGE, WITH, SELECT or CALL statement, not %q", ErrBadHook, w)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("preparing PAYMENT_HOOK_SQL: %w", interpret(err))
	}
	defer conn.Release()
	sd, err := conn.Conn().PgConn().Prepare(ctx, "", sql, hookParams)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return nil, fmt.Errorf("%w: %s", ErrBadHook, pgErr.Message)
		}
		return nil, fmt.Errorf("preparing PAYMENT_HOOK_SQL: %w", err)
	}
	if len(sd.ParamOIDs) > len(hookParams) {
		return nil, fmt.Errorf("%w: it uses $%d, but only $1 to $%d exist", ErrBadHook, len(sd.ParamOIDs), len(hookParams))
	}
	return &Hook{sql: sql}, nil
}

// RunHook runs h once for each of inserted, in one round trip. Any failure
// fails the transaction: the range is rolled back and retried, never skipped.
func (t *Tx) RunHook(ctx context.Context, h *Hook, inserted []Inserted) error {
	if h == nil || len(inserted) == 0 {
		return nil
	}
	b := &pgconn.Batch{}
	for _, p := range inserted {
		b.ExecParams(h.sql, [][]byte{
			[]byte(strconv.FormatInt(p.ID, 10)),
			[]byte(strconv.FormatUint(p.ChainID, 10)),
			[]byte(p.Contract),
			[]byte(p.TxHash),
			[]byte(strconv.FormatUint(uint64(p.LogIndex), 10)),
			[]byte(strconv.FormatInt(p.BlockNumber, 10)),
			[]byte(p.BlockHash),
			[]byte(p.Payer),
			[]byte(p.Digest),
			[]byte(p.Amount.String()),
			[]byte(p.BurnedAt.UTC().Format(time.RFC3339Nano)),
		}, hookParams, nil, nil)
	}
	pg := t.tx.Conn().PgConn()
	if _, err := pg.ExecBatch(ctx, b).ReadAll(); err != nil {
		return fmt.Errorf("running PAYMENT_HOOK_SQL for %d payments: %w", len(inserted), interpret(err))
	}
	// The hook must leave the transaction open, and its bounds in place.
	if st := pg.TxStatus(); st != 'T' {
		return fmt.Errorf("%w: it ended the transaction (status %q)", ErrBadHook, st)
	}
	return t.bound(ctx)
}
