package consume_test

import (
	"context"
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
	contractC = "0x" + strings.Repeat("c3", 20)
)

// spec is an event to record; zero fields take defaults (chain 1,
// contract A, block 100+i, payer and amount from the event's number).
type spec struct {
	kind     string
	chain    uint64
	contract string
	block    int64
}

// makeEvent builds burn number i's event of s.kind: each i is its own burn.
func makeEvent(i int, s spec) payments.Event {
	if s.chain == 0 {
		s.chain = 1
	}
	if s.contract == "" {
		s.contract = contractA
	}
	if s.block == 0 {
		s.block = int64(100 + i)
	}
	p := payments.Payment{
		ChainID:     s.chain,
		Contract:    s.contract,
		TxHash:      fmt.Sprintf("0x%064x", i),
		BlockNumber: s.block,
		BlockHash:   blockHash(s.block),
		Payer:       payerOf(i),
		Digest:      fmt.Sprintf("0x%064x", 2_000_000+i),
		Amount:      big.NewInt(int64(i) * 1000),
		BurnedAt:    time.Unix(1_700_000_000+int64(i), 0).UTC(),
	}
	// A confirmed event's payment id is the payment's, given when
	// InsertPayments records it.
	return payments.EventFor(s.kind, p, 0)
}

func payerOf(i int) string { return fmt.Sprintf("0x%040x", i%3+1) }

// blockHash is block n's hash on the tests' chains (block 100+i holds burn
// i by default, with hash 1000000+i).
func blockHash(n int64) string { return fmt.Sprintf("0x%064x", 999_900+n) }

// group is a poller group as the tests run it: a cursor, which its
// replicas take in turns, and the contracts it records on one chain.
type group struct {
	cursor    string
	chain     uint64
	contracts []string
}

// groupOf is the group recording evs: one per chain and set of contracts.
func groupOf(evs []payments.Event) (group, error) {
	g := group{chain: evs[0].ChainID}
	for _, e := range evs {
		if e.ChainID != g.chain {
			return group{}, fmt.Errorf("events of chains %d and %d in one transaction: a group records one chain", g.chain, e.ChainID)
		}
		if !slices.Contains(g.contracts, e.Contract) {
			g.contracts = append(g.contracts, e.Contract)
		}
	}
	slices.Sort(g.contracts)
	g.cursor = fmt.Sprintf("chain-%d-%s", g.chain, strings.Join(g.contracts, "-"))
	return g, nil
}

// writerLimits bound a test writer's transaction as LOCK_WAIT and
// TX_TIMEOUT bound the poller's, with a lock wait long enough for the
// replicas of a group, which queue for its cursor, to take turns on a
// loaded machine.
var writerLimits = payments.Limits{LockWait: 30 * time.Second, TxTimeout: 30 * time.Second}

// writeTx runs one transaction of group g through the payments package, as
// the poller's writer does (poller.Writer.Begin, RangeTx.record,
// RangeTx.Commit): it begins with the writer's bounds, takes the group's
// cursor, asks plan what to record after the cursor as it stands, takes the
// writers' lock of the group's contracts, stages the events (stage), moves
// the cursor to block to and commits. The events are numbered inside COMMIT
// by the trigger of migration 10, which also notifies. plan returning no
// events ends the transaction without writing, and writeTx returns false.
func writeTx(ctx context.Context, s *payments.Store, g group, plan func(cur payments.Cursor) (evs []payments.Event, to int64)) (bool, error) {
	tx, err := s.Begin(ctx, writerLimits)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	cur, err := tx.LockCursor(ctx, g.cursor)
	if err != nil {
		return false, err
	}
	evs, to := plan(cur)
	if len(evs) == 0 {
		return false, nil
	}
	if err := tx.LockWriters(ctx, g.chain, g.contracts); err != nil {
		return false, err
	}
	if err := stage(ctx, tx, evs); err != nil {
		return false, err
	}
	if err := tx.MoveCursor(ctx, g.cursor, cur.Block, to, blockHash(to)); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// stage stages evs, in order, the way the poller records each kind: a
// confirmed event by inserting its payment (InsertPayments stages the
// confirmed event of each payment it inserts), settling the burn's pending
// row; a seen one as head tracking does, the burn pending and its event
// appended; a retracted one appended, its pending row dropped.
func stage(ctx context.Context, tx *payments.Tx, evs []payments.Event) error {
	for len(evs) > 0 {
		confirmed := evs[0].Kind == payments.KindConfirmed
		n := 1
		for n < len(evs) && (evs[n].Kind == payments.KindConfirmed) == confirmed {
			n++
		}
		run := evs[:n]
		evs = evs[n:]
		var seen, settled []payments.Payment
		for _, e := range run {
			if e.Kind == payments.KindSeen {
				seen = append(seen, e.Payment())
			} else {
				settled = append(settled, e.Payment())
			}
		}
		if err := tx.DropPending(ctx, settled); err != nil {
			return err
		}
		if confirmed {
			ins, err := tx.InsertPayments(ctx, settled)
			if err != nil {
				return err
			}
			if len(ins) != len(settled) {
				return fmt.Errorf("%d of %d payments inserted: the others are recorded already, and get no event", len(ins), len(settled))
			}
			continue
		}
		if err := tx.PutPending(ctx, seen); err != nil {
			return err
		}
		if _, err := tx.AppendEvents(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// appendEvents records evs in one transaction of the group recording
// their chain and contracts (writeTx), moving its cursor to their last
// block, and returns them as payment_events holds them: with their seqs,
// given in commit order, and a confirmed event's payment id. Each must be
// the first occurrence of its step (a later one is recorded under another
// id).
func appendEvents(ctx context.Context, pool *pgxpool.Pool, evs ...payments.Event) ([]payments.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	g, err := groupOf(evs)
	if err != nil {
		return nil, err
	}
	s := payments.NewStore(pool)
	if _, err := s.SeedCursor(ctx, g.cursor, -1, ""); err != nil {
		return nil, err
	}
	_, err = writeTx(ctx, s, g, func(cur payments.Cursor) ([]payments.Event, int64) {
		to := cur.Block
		for _, e := range evs {
			to = max(to, e.BlockNumber)
		}
		return evs, to
	})
	if err != nil {
		return nil, fmt.Errorf("recording %d events: %w", len(evs), err)
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.EventID
	}
	rows, err := pool.Query(ctx, `SELECT `+payments.EventColumns+` FROM payment_events WHERE event_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (payments.Event, error) { return payments.ScanEvent(row) })
	if err != nil {
		return nil, err
	}
	byID := map[string]payments.Event{}
	for _, e := range got {
		byID[e.EventID] = e
	}
	out := make([]payments.Event, len(evs))
	for i, id := range ids {
		e, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("event %s not in payment_events after the commit (recorded as a later occurrence?)", id)
		}
		out[i] = e
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
// that lacked the later commits would: the rows, the payments recorded
// with the lost confirmed events and the counter go back.
func loseTail(t *testing.T, pool *pgxpool.Pool, keep int64) {
	t.Helper()
	execSQL(t, pool, `DELETE FROM payments WHERE id IN (SELECT payment_id FROM payment_events WHERE seq > $1)`, keep)
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
