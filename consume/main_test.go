package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

func TestMain(m *testing.M) {
	if childURL() != "" {
		// A consumer process for TestRunKilledBeforeCommit: no template,
		// no leak check (it is killed).
		m.Run()
		return
	}
	pgtest.Main(m, func() error { return goleak.Find() })
}

var (
	contractA = "0x" + strings.Repeat("a1", 20)
	contractB = "0x" + strings.Repeat("b2", 20)
)

// spec is an event to record; zero fields take defaults (chain 1,
// contract A, payer and amount from the event's number).
type spec struct {
	kind     string
	chain    uint64
	contract string
}

// makeEvent builds burn number i's event of s.kind: each i is its own burn.
func makeEvent(i int, s spec) payments.Event {
	if s.chain == 0 {
		s.chain = 1
	}
	if s.contract == "" {
		s.contract = contractA
	}
	e := payments.Event{
		Kind:        s.kind,
		ChainID:     s.chain,
		Contract:    s.contract,
		TxHash:      fmt.Sprintf("0x%064x", i),
		BlockNumber: int64(100 + i),
		BlockHash:   fmt.Sprintf("0x%064x", 1_000_000+i),
		Payer:       payerOf(i),
		Digest:      fmt.Sprintf("0x%064x", 2_000_000+i),
		Amount:      big.NewInt(int64(i) * 1000),
		BurnedAt:    time.Unix(1_700_000_000+int64(i), 0).UTC(),
	}
	if s.kind == payments.KindConfirmed {
		e.PaymentID = int64(i)
	}
	e.EventID = payments.EventID(e.ChainID, e.TxHash, e.LogIndex, e.Kind, e.BlockHash)
	return e
}

func payerOf(i int) string { return fmt.Sprintf("0x%040x", i%3+1) }

// appendEvents records evs in one transaction under the numbering rule of
// migration 6 (take the counter row, insert, advance it, notify, commit)
// and returns them with their seqs.
func appendEvents(ctx context.Context, pool *pgxpool.Pool, evs ...payments.Event) ([]payments.Event, error) {
	out := slices.Clone(evs)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var last int64
		if err := tx.QueryRow(ctx, `SELECT last_seq FROM payment_event_seq FOR UPDATE`).Scan(&last); err != nil {
			return err
		}
		for i := range out {
			e := &out[i]
			last++
			e.Seq = last
			var pid *int64
			if e.PaymentID != 0 {
				pid = &e.PaymentID
			}
			if _, err := tx.Exec(ctx, `INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index,
				block_number, block_hash, payer, digest, amount, burned_at, payment_id)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::numeric, $13, $14)`,
				e.Seq, e.EventID, e.Kind, int64(e.ChainID), e.Contract, e.TxHash, int32(e.LogIndex), e.BlockNumber,
				e.BlockHash, e.Payer, e.Digest, e.Amount.String(), e.BurnedAt, pid); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE payment_event_seq SET last_seq = $1`, last); err != nil {
			return err
		}
		payload, _ := json.Marshal(map[string]int64{"seq": last})
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.EventsChannel, string(payload))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d events: %w", len(evs), err)
	}
	return out, nil
}

// record is appendEvents for a test.
func record(t *testing.T, pool *pgxpool.Pool, evs ...payments.Event) []payments.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := appendEvents(ctx, pool, evs...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// burns records n events of kind numbered from first, one transaction each.
func burns(t *testing.T, pool *pgxpool.Pool, first, n int, kind string) []payments.Event {
	t.Helper()
	var out []payments.Event
	for i := first; i < first+n; i++ {
		out = append(out, record(t, pool, makeEvent(i, spec{kind: kind}))...)
	}
	return out
}

// loseTail makes payment_events end at seq keep, as a promoted standby
// that lacked the later commits would: the rows and the counter go back.
func loseTail(t *testing.T, pool *pgxpool.Pool, keep int64) {
	t.Helper()
	execSQL(t, pool, `DELETE FROM payment_events WHERE seq > $1`, keep)
	execSQL(t, pool, `UPDATE payment_event_seq SET last_seq = $1`, keep)
}

func execSQL(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// ledger creates the service's own tables: each credit as a row, in the
// order committed, and a balance per payer.
func ledger(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	execSQL(t, pool, `CREATE TABLE credits (
		n        bigserial PRIMARY KEY,
		seq      bigint NOT NULL,
		event_id text   NOT NULL,
		consumer text   NOT NULL,
		txid     bigint NOT NULL DEFAULT txid_current());
	CREATE TABLE balances (payer text PRIMARY KEY, amount numeric NOT NULL)`)
}

// credit is the crediting handler: a credits row and the payer's balance,
// in the consumer's transaction.
func credit(label string) consume.Handler {
	return func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if _, err := tx.Exec(ctx, `INSERT INTO credits (seq, event_id, consumer) VALUES ($1, $2, $3)`, e.Seq, e.EventID, label); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO balances (payer, amount) VALUES ($1, $2::numeric)
			ON CONFLICT (payer) DO UPDATE SET amount = balances.amount + excluded.amount`, e.Payer, e.Amount.String())
		return err
	}
}

// credited returns the seqs credited, in the order their rows committed.
func credited(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	return int64s(t, pool, `SELECT seq FROM credits ORDER BY n`)
}

func int64s(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if out == nil {
		out = []int64{}
	}
	return out
}

// balances returns each payer's balance as text.
func balances(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `SELECT payer, amount::text FROM balances`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var p, a string
		if err := rows.Scan(&p, &a); err != nil {
			t.Fatal(err)
		}
		out[p] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantBalances is what crediting evs once each gives.
func wantBalances(evs []payments.Event) map[string]string {
	sum := map[string]*big.Int{}
	for _, e := range evs {
		if sum[e.Payer] == nil {
			sum[e.Payer] = new(big.Int)
		}
		sum[e.Payer].Add(sum[e.Payer], e.Amount)
	}
	out := map[string]string{}
	for p, s := range sum {
		out[p] = s.String()
	}
	return out
}

func seqs(evs []payments.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// running is a consumer started in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

// start runs fn in the background until stop (or the test's end).
func start(t *testing.T, fn func(ctx context.Context) error) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			_ = err // how the consumer ended is the test's to check, if it cares
		case <-time.After(30 * time.Second):
			t.Errorf("consumer still running 30s after its context ended")
		}
	})
	return r
}

// stop cancels the consumer and returns what it returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait returns what the consumer returned, failing t if it does not return
// within 30 seconds.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("consumer did not return within 30s")
		return nil
	}
}

// waitFor polls cond until it holds, failing t after 30 seconds with what
// cond last said.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: still %s after 30s", what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitOffset waits until consumer name's offset is seq.
func waitOffset(t *testing.T, pool *pgxpool.Pool, name string, seq int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("consumer %q at seq %d", name, seq), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p, err := consume.Offset(ctx, pool, name)
		if err != nil {
			return false, err.Error()
		}
		return p.Seq == seq, fmt.Sprintf("at seq %d", p.Seq)
	})
}

func offset(t *testing.T, pool *pgxpool.Pool, name string) consume.Position {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := consume.Offset(ctx, pool, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// quick are the options every test consumer uses: short polls and a
// batch time that a loaded machine still meets.
func quick(opts ...consume.Option) []consume.Option {
	return append([]consume.Option{consume.PollInterval(50 * time.Millisecond), consume.BatchTimeout(10 * time.Second)}, opts...)
}

func isDiverged(err error) (*consume.DivergedError, bool) {
	var d *consume.DivergedError
	return d, errors.As(err, &d)
}
