package payments_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var limits = payments.Limits{LockWait: 200 * time.Millisecond, TxTimeout: 5 * time.Second}

func maxUint256() *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
}

func payment(tx byte, index uint32, amount *big.Int) payments.Payment {
	return payments.Payment{
		ChainID:     1337,
		Contract:    "0x" + strings.Repeat("ab", 20),
		TxHash:      "0x" + strings.Repeat(string("0123456789abcdef"[tx%16]), 64),
		LogIndex:    index,
		BlockNumber: 7,
		BlockHash:   "0x" + strings.Repeat("cd", 32),
		Payer:       "0x" + strings.Repeat("12", 20),
		Digest:      "0x" + strings.Repeat("34", 32),
		Amount:      amount,
		BurnedAt:    time.Unix(1_700_000_000, 0).UTC(),
	}
}

type row struct {
	TxHash   string
	LogIndex int
	Amount   string
}

func ledger(t *testing.T, pool *pgxpool.Pool) []row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT tx_hash, log_index, amount::text FROM payments ORDER BY tx_hash, log_index`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.TxHash, &r.LogIndex, &r.Amount); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newStore(t *testing.T) (*payments.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	return payments.NewStore(pool), pool
}

// commitRange runs one range's transaction as the poller does.
func commitRange(t *testing.T, s *payments.Store, id string, from, to int64, ps []payments.Payment) int {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	cur, err := tx.LockCursor(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Block != from {
		t.Fatalf("cursor at %d, want %d", cur.Block, from)
	}
	ins, err := tx.InsertPayments(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.MoveCursor(ctx, id, from, to, "0x"+strings.Repeat("ef", 32)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return len(ins)
}

func TestInsertIsIdempotentAndCounted(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	first := []payments.Payment{payment(1, 0, big.NewInt(5)), payment(1, 1, big.NewInt(6)), payment(2, 0, maxUint256())}
	if n := commitRange(t, s, "c", -1, 10, first); n != 3 {
		t.Fatalf("first insert: %d inserted, want 3", n)
	}
	// The same payments again plus one new: only the new one counts.
	again := append(first, payment(3, 4, big.NewInt(1)))
	if n := commitRange(t, s, "c", 10, 20, again); n != 1 {
		t.Fatalf("second insert: %d inserted, want 1", n)
	}
	want := []row{
		{"0x" + strings.Repeat("1", 64), 0, "5"},
		{"0x" + strings.Repeat("1", 64), 1, "6"},
		{"0x" + strings.Repeat("2", 64), 0, maxUint256().String()},
		{"0x" + strings.Repeat("3", 64), 4, "1"},
	}
	got := ledger(t, pool)
	if len(got) != len(want) {
		t.Fatalf("ledger has %d rows, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %v, want %v", i, got[i], want[i])
		}
	}
	cur, err := s.Cursor(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Block != 20 || cur.Hash != "0x"+strings.Repeat("ef", 32) {
		t.Fatalf("cursor = %d %s, want 20", cur.Block, cur.Hash)
	}
}

// TestInsertNewPaymentsRefusesARecordedOne: the plain insert of payments a
// writer found new writes them with their confirmed events; given one
// recorded already it fails with ErrRecorded and writes nothing, the
// unique key guarding the ledger as ON CONFLICT did.
func TestInsertNewPaymentsRefusesARecordedOne(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	first := []payments.Payment{payment(1, 0, big.NewInt(5)), payment(2, 0, big.NewInt(6))}
	if err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		ins, err := tx.InsertNewPayments(ctx, first)
		if err == nil && len(ins) != 2 {
			err = fmt.Errorf("%d inserted, want 2", len(ins))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		_, err := tx.InsertNewPayments(ctx, []payments.Payment{payment(3, 0, big.NewInt(7)), first[1]})
		return err
	})
	if !errors.Is(err, payments.ErrRecorded) {
		t.Fatalf("InsertNewPayments with a recorded payment = %v, want ErrRecorded", err)
	}
	got := ledger(t, pool)
	if len(got) != 2 || got[0].Amount != "5" || got[1].Amount != "6" {
		t.Fatalf("ledger %v, want the first two only", got)
	}
	evs, err := s.Events(ctx, 0, 10)
	if err != nil || len(evs) != 2 || evs[0].Kind != payments.KindConfirmed {
		t.Fatalf("events %v, %v; want the first two's confirmed", evs, err)
	}
}

func TestFailedRangeRollsBackInsertsAndCursor(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", 99, ""); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if ins, err := tx.InsertPayments(ctx, []payments.Payment{payment(1, 0, big.NewInt(5))}); err != nil || len(ins) != 1 {
		t.Fatalf("insert: %d, %v", len(ins), err)
	}
	if err := tx.MoveCursor(ctx, "c", 99, 120, "0x"+strings.Repeat("ef", 32)); err != nil {
		t.Fatal(err)
	}
	// A bad row fails the statement; the transaction must leave nothing behind.
	bad := payment(2, 0, big.NewInt(1))
	bad.Payer = "0xNOTHEX"
	if _, err := tx.InsertPayments(ctx, []payments.Payment{bad}); err == nil {
		t.Fatal("inserting a malformed payer succeeded")
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("commit after a failed statement succeeded")
	}
	if got := ledger(t, pool); len(got) != 0 {
		t.Fatalf("ledger after rollback = %v, want empty", got)
	}
	cur, err := s.Cursor(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Block != 99 || cur.Hash != "" {
		t.Fatalf("cursor after rollback = %d %q, want 99 and no hash", cur.Block, cur.Hash)
	}
}

func TestExplicitRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.InsertPayments(ctx, []payments.Payment{payment(1, 0, big.NewInt(5))}); err != nil {
		t.Fatal(err)
	}
	if err := tx.MoveCursor(ctx, "c", -1, 5, "0x"+strings.Repeat("ef", 32)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if got := ledger(t, pool); len(got) != 0 {
		t.Fatalf("ledger = %v, want empty", got)
	}
	if cur, _ := s.Cursor(ctx, "c"); cur.Block != -1 {
		t.Fatalf("cursor = %d, want -1", cur.Block)
	}
}

func TestLockTimeoutMeansStandby(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	holder, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	standby, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Rollback()
	_, err = standby.LockCursor(ctx, "c")
	if !errors.Is(err, payments.ErrLockTimeout) {
		t.Fatalf("second lock: %v, want ErrLockTimeout", err)
	}
}

func TestIdleHolderLosesLockToServerTimeout(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	short := payments.Limits{LockWait: 3 * time.Second, TxTimeout: 500 * time.Millisecond}
	frozen, err := s.Begin(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback()
	if _, err := frozen.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	// The holder now does nothing; Postgres must end its session and free the lock.
	other, err := s.Begin(ctx, payments.Limits{LockWait: 3 * time.Second, TxTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	cur, err := other.LockCursor(ctx, "c")
	if err != nil {
		t.Fatalf("lock after the holder's idle timeout: %v", err)
	}
	if cur.Block != -1 {
		t.Fatalf("cursor = %d, want -1", cur.Block)
	}
	if _, err := frozen.InsertPayments(ctx, []payments.Payment{payment(1, 0, big.NewInt(1))}); err == nil {
		if err := frozen.Commit(ctx); err == nil {
			t.Fatal("the timed-out holder committed")
		}
	}
}

func TestMoveCursorRefusesAStaleFrom(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", 50, ""); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.LockCursor(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := tx.MoveCursor(ctx, "c", 49, 60, "0x"+strings.Repeat("ef", 32)); !errors.Is(err, payments.ErrCursorMoved) {
		t.Fatalf("MoveCursor from a stale 49 = %v, want ErrCursorMoved", err)
	}
	if err := tx.MoveCursor(ctx, "missing", 50, 60, ""); !errors.Is(err, payments.ErrCursorMoved) {
		t.Fatalf("MoveCursor of a missing cursor = %v, want ErrCursorMoved", err)
	}
}

// TestTransactionsAreBoundedOnTheServer: the bounds that free a frozen
// holder's lock are set inside the transaction, on the server, by the
// statement that begins it: there is no moment at which the session is idle
// in a transaction without them (a client frozen there would keep it open
// for good).
func TestTransactionsAreBoundedOnTheServer(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	tx, err := s.Begin(ctx, payments.Limits{LockWait: 1500 * time.Millisecond, TxTimeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var state, last string
	if err := pool.QueryRow(ctx, `SELECT state, query FROM pg_stat_activity WHERE pid = $1`,
		int32(tx.BackendPIDForTest())).Scan(&state, &last); err != nil {
		t.Fatal(err)
	}
	if want := `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL "lock_timeout" = 1500; SET LOCAL "statement_timeout" = 7000; ` +
		`SET LOCAL "idle_in_transaction_session_timeout" = 7000; ` +
		`SET LOCAL "burnpoller"."writer_schema" = '` + strconv.Itoa(int(migrations.Latest())) + `'`; state != "idle in transaction" || last != want {
		t.Fatalf("the session after Begin: %s after %q, want idle in transaction after %q", state, last, want)
	}
	var got []string
	for _, name := range []string{"lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout", migrations.WriterSetting} {
		var v string
		if err := tx.QueryRowForTest(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if want := []string{"1500ms", "7s", "7s", strconv.Itoa(int(migrations.Latest()))}; !slices.Equal(got, want) {
		t.Fatalf("settings = %v, want %v", got, want)
	}
	// A long wait for a lock, then short work: the bounds shrink in place.
	if err := tx.SetLimits(ctx, payments.Limits{LockWait: 2 * time.Second, TxTimeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, name := range []string{"lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout"} {
		var v string
		if err := tx.QueryRowForTest(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if want := []string{"2s", "1min", "1min"}; !slices.Equal(got, want) {
		t.Fatalf("settings after SetLimits = %v, want %v", got, want)
	}
	// Local to the transaction: the session's defaults are untouched.
	var outside string
	if err := pool.QueryRow(ctx, `SELECT current_setting('lock_timeout')`).Scan(&outside); err != nil {
		t.Fatal(err)
	}
	if outside != "0" {
		t.Fatalf("lock_timeout outside the transaction = %s", outside)
	}
}

func TestSeedCursorKeepsExistingCursor(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if c, err := s.SeedCursor(ctx, "c", 9, ""); err != nil || c.Block != 9 {
		t.Fatalf("first seed = %v, %v", c, err)
	}
	if c, err := s.SeedCursor(ctx, "c", 0, ""); err != nil || c.Block != 9 {
		t.Fatalf("second seed = %v, %v; want the cursor left at 9", c, err)
	}
	if _, err := s.Cursor(ctx, "missing"); !errors.Is(err, payments.ErrCursorNotFound) {
		t.Fatalf("missing cursor: %v, want ErrCursorNotFound", err)
	}
}

func TestInsertRejectsNegativeAndKeepsExactAmounts(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.InsertPayments(ctx, []payments.Payment{payment(1, 0, big.NewInt(-1))}); err == nil {
		t.Fatal("negative amount accepted")
	}
	tx.Rollback()

	amounts := []*big.Int{big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 255), maxUint256()}
	var ps []payments.Payment
	for i, a := range amounts {
		ps = append(ps, payment(byte(i+1), 0, a))
	}
	commitRange(t, s, "c", -1, 0, ps)
	got := ledger(t, pool)
	for i, a := range amounts {
		if got[i].Amount != a.String() {
			t.Errorf("amount %d stored as %s, want %s", i, got[i].Amount, a)
		}
	}
}

// TestPolledAge: a cursor never polled has no age; one marked as read a
// second ago is about a second old, by the database's clock, and the mark
// commits with the transaction or not at all.
func TestPolledAge(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	inTx := func(f func(tx *payments.Tx)) {
		t.Helper()
		tx, err := s.Begin(ctx, limits)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.LockCursor(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		f(tx)
	}
	inTx(func(tx *payments.Tx) {
		if _, ok, err := tx.PolledAge(ctx, "c"); err != nil || ok {
			t.Fatalf("PolledAge of a cursor never polled: ok %v, %v", ok, err)
		}
		if err := tx.MarkPolled(ctx, "c", time.Second); err != nil {
			t.Fatal(err)
		}
		// Rolled back: never polled still.
	})
	inTx(func(tx *payments.Tx) {
		if _, ok, err := tx.PolledAge(ctx, "c"); err != nil || ok {
			t.Fatalf("PolledAge after a rolled-back mark: ok %v, %v", ok, err)
		}
		if err := tx.MarkPolled(ctx, "c", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	inTx(func(tx *payments.Tx) {
		age, ok, err := tx.PolledAge(ctx, "c")
		if err != nil || !ok || age < time.Second || age > time.Minute {
			t.Fatalf("PolledAge = %v, %v, %v; want a second or a little more", age, ok, err)
		}
	})
}

// TestARangeOfThousandsOfBurnsIsRecordedWhole: a range of 2,500 burns (a
// block of thousands, inserted as several statements) records every
// payment with its amount and one confirmed event each, numbered in chain
// order across the statements; with ON CONFLICT the recorded ones are
// skipped in whichever statement they fall, and the plain insert given one
// recorded in its last statement writes nothing at all.
func TestARangeOfThousandsOfBurnsIsRecordedWhole(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	burn := func(i int) payments.Payment {
		p := payment(byte(i/1000), uint32(i%1000), new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 200), big.NewInt(int64(i))))
		p.TxHash = fmt.Sprintf("0x%064x", i/100+1) // a hundred burns a transaction
		p.LogIndex = uint32(i)
		return p
	}
	var ps []payments.Payment
	for i := range 2500 {
		ps = append(ps, burn(i))
	}
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	// 1,200 of them first, then all 2,500: the second range inserts the
	// other 1,300, which its second and third statements hold.
	if n := commitRange(t, s, "c", -1, 10, ps[:1200]); n != 1200 {
		t.Fatalf("first range: %d inserted, want 1200", n)
	}
	if n := commitRange(t, s, "c", 10, 20, ps); n != 1300 {
		t.Fatalf("second range: %d inserted, want 1300", n)
	}
	err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		fresh := []payments.Payment{payment(0xf, 1, big.NewInt(1))}
		for i := range 2100 {
			p := burn(5000 + i)
			fresh = append(fresh, p)
		}
		_, err := tx.InsertNewPayments(ctx, append(fresh, ps[2499]))
		return err
	})
	if !errors.Is(err, payments.ErrRecorded) {
		t.Fatalf("InsertNewPayments with a recorded payment in its last statement = %v, want ErrRecorded", err)
	}
	var rows, events int
	var sum, firstTx, lastTx string
	if err := pool.QueryRow(ctx, `SELECT count(*), sum(amount)::text FROM payments`).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	want := new(big.Int).Mul(new(big.Int).Lsh(big.NewInt(1), 200), big.NewInt(2500))
	want.Add(want, big.NewInt(2499*2500/2))
	if rows != 2500 || sum != want.String() {
		t.Fatalf("ledger: %d rows summing to %s, want 2500 summing to %s", rows, sum, want)
	}
	// One confirmed event a payment, numbered in chain order: by log
	// index here, across every statement and both ranges.
	if err := pool.QueryRow(ctx, `
		SELECT count(*), min(tx_hash), max(tx_hash) FROM payment_events e
		WHERE kind = 'confirmed' AND seq = (SELECT count(*) FROM payment_events f WHERE f.log_index <= e.log_index)`).
		Scan(&events, &firstTx, &lastTx); err != nil {
		t.Fatal(err)
	}
	if events != 2500 || firstTx != ps[0].TxHash || lastTx != ps[2499].TxHash {
		t.Fatalf("%d events numbered in chain order (txs %s to %s), want 2500", events, firstTx, lastTx)
	}
}

// TestInsertNewPaymentsCopiesExactRowsAndEvents: the payments a writer
// found new go in with COPY, their ids taken from the table's sequence,
// and their confirmed events take their places among the transaction's
// other events in chain order: a seen event before them, the payments
// given out of chain order, a retracted event after them. Every column of
// every payment and event is what was given, amounts at both ends of the
// uint256 range included; the ids returned are the rows' ids; one commit
// gives every event the same history_hash.
func TestInsertNewPaymentsCopiesExactRowsAndEvents(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	maxU256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	late, early, zero := payment(2, 1, maxU256), payment(1, 5, big.NewInt(123456789)), payment(3, 0, big.NewInt(0))
	late.BlockNumber, late.BlockHash = 9, "0x"+strings.Repeat("9e", 32)
	zero.BlockNumber, zero.Payer, zero.Digest = 8, "0x"+strings.Repeat("5a", 20), "0x"+strings.Repeat("d1", 32)
	seen, retracted := payment(4, 2, big.NewInt(42)), payment(5, 3, big.NewInt(43))
	var ins []payments.Inserted
	if err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		if _, err := tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindSeen, seen, 0)}); err != nil {
			return err
		}
		var err error
		if ins, err = tx.InsertNewPayments(ctx, []payments.Payment{late, early, zero}); err != nil {
			return err
		}
		_, err = tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindRetracted, retracted, 0)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(ins) != 3 || ins[0].TxHash != late.TxHash || ins[1].TxHash != early.TxHash ||
		ins[2].TxHash != zero.TxHash || ins[0].ID >= ins[1].ID || ins[1].ID >= ins[2].ID {
		t.Fatalf("inserted %+v, want the three in the order given, ids increasing", ins)
	}
	byID := map[int64]payments.Payment{ins[0].ID: late, ins[1].ID: early, ins[2].ID: zero}
	stored, err := s.PaymentsByID(ctx, ins[0].ID, ins[2].ID)
	if err != nil || len(stored) != 3 {
		t.Fatalf("PaymentsByID = %d rows, %v; want 3", len(stored), err)
	}
	for _, r := range stored {
		want, ok := byID[r.ID]
		if !ok || r.Orphaned || r.Amount.Cmp(want.Amount) != 0 || !r.BurnedAt.Equal(want.BurnedAt) {
			t.Fatalf("payment %d = %+v, want %+v", r.ID, r, want)
		}
		got, exp := r.Payment, want
		got.Amount, exp.Amount, got.BurnedAt, exp.BurnedAt = nil, nil, time.Time{}, time.Time{}
		if got != exp {
			t.Fatalf("payment %d = %+v, want %+v", r.ID, got, exp)
		}
	}
	evs, err := s.Events(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []payments.Event{
		payments.EventFor(payments.KindSeen, seen, 0),
		payments.EventFor(payments.KindConfirmed, early, ins[1].ID), // block 7
		payments.EventFor(payments.KindConfirmed, zero, ins[2].ID),  // block 8
		payments.EventFor(payments.KindConfirmed, late, ins[0].ID),  // block 9
		payments.EventFor(payments.KindRetracted, retracted, 0),
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, e := range evs {
		w := want[i]
		if e.Seq != int64(i+1) || e.History != evs[0].History || len(e.History) != 64 || e.Amount.Cmp(w.Amount) != 0 ||
			!e.BurnedAt.Equal(w.BurnedAt) {
			t.Fatalf("event %d = %+v, want seq %d, %+v, the commit's history", i, e, i+1, w)
		}
		e.Seq, e.History, e.CreatedAt, e.Amount, w.Amount, e.BurnedAt, w.BurnedAt = 0, "", time.Time{}, nil, nil, time.Time{}, time.Time{}
		if e != w {
			t.Fatalf("event %d = %+v, want %+v", i, e, w)
		}
	}
}

// TestInsertNewPaymentsGivenOneTwice: a range that gives the same burn
// twice to the plain insert fails with ErrRecorded and writes nothing.
func TestInsertNewPaymentsGivenOneTwice(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	p := payment(1, 0, big.NewInt(5))
	err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		_, err := tx.InsertNewPayments(ctx, []payments.Payment{p, payment(2, 0, big.NewInt(6)), p})
		return err
	})
	if !errors.Is(err, payments.ErrRecorded) {
		t.Fatalf("InsertNewPayments given a burn twice = %v, want ErrRecorded", err)
	}
	var rows, events, staged int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM payment_events),
		(SELECT count(*) FROM payment_events_staged)`).Scan(&rows, &events, &staged); err != nil || rows+events+staged != 0 {
		t.Fatalf("after the failed insert: %d payments, %d events, %d staged (%v); want none", rows, events, staged, err)
	}
}

// TestUnstorablePaymentsWriteNothing: a payment the ledger's columns cannot
// hold (an amount that is no uint256, a chain id or log index beyond its
// column) fails either insert with one error naming it, before any
// statement: the other payments given with it are not written either.
func TestUnstorablePaymentsWriteNothing(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	bad := map[string]payments.Payment{
		"amount":    payment(9, 0, big.NewInt(-1)),
		"chain id":  func() payments.Payment { p := payment(9, 0, big.NewInt(1)); p.ChainID = 1 << 63; return p }(),
		"log index": payment(9, 1<<31, big.NewInt(1)),
	}
	inserts := map[string]func(*payments.Tx, context.Context, []payments.Payment) ([]payments.Inserted, error){
		"InsertPayments": (*payments.Tx).InsertPayments, "InsertNewPayments": (*payments.Tx).InsertNewPayments,
	}
	for what, p := range bad {
		for name, insert := range inserts {
			err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
				_, err := insert(tx, ctx, []payments.Payment{payment(1, 0, big.NewInt(5)), p})
				return err
			})
			if err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), p.TxHash) {
				t.Fatalf("%s of a payment with a bad %s = %v, want an error naming it", name, what, err)
			}
		}
	}
	var rows, staged int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM payments),
		(SELECT count(*) FROM payment_events_staged)`).Scan(&rows, &staged); err != nil || rows+staged != 0 {
		t.Fatalf("%d payments, %d staged (%v); want none", rows, staged, err)
	}
}
