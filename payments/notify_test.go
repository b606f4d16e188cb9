package payments_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

func listen(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(context.Background(), "LISTEN "+payments.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	return conn
}

// drain returns every notification of the transactions committed so far,
// in order, and nothing else: it sends a marker of its own on the channel
// and reads until the marker arrives. Notifications reach a listener in
// commit order, so once the marker is in, every earlier one is, and a
// missing or an extra notification shows at once, without waiting to see
// whether another comes. The minute's deadline only keeps a broken test
// from hanging.
func drain(t *testing.T, conn *pgx.Conn) []payments.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker := "drain-marker-" + strconv.FormatInt(time.Now().UnixNano(), 10)
	// A session receives what it notifies on a channel it listens to.
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.NotifyChannel, marker); err != nil {
		t.Fatal(err)
	}
	var out []payments.Notification
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("waiting for the notifications and the marker (%d so far): %v", len(out), err)
		}
		if n.Payload == marker {
			return out
		}
		var got payments.Notification
		if err := json.Unmarshal([]byte(n.Payload), &got); err != nil {
			t.Fatalf("payload %q: %v", n.Payload, err)
		}
		out = append(out, got)
	}
}

// insertAndCommit inserts ps (and notifies) in one transaction; commit=false rolls back.
func insertAndCommit(t *testing.T, s *payments.Store, ps []payments.Payment, hook *payments.Hook, commit bool) ([]payments.Inserted, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ins, err := tx.InsertPayments(ctx, ps)
	if err != nil {
		return nil, err
	}
	if err := tx.RunHook(ctx, hook, ins); err != nil {
		return nil, err
	}
	var note payments.Notification
	note.Add(ins)
	if err := tx.Notify(ctx, note); err != nil {
		return nil, err
	}
	if !commit {
		return ins, nil
	}
	return ins, tx.Commit(ctx)
}

func TestOneNotificationPerCommittedTransactionWithNewPayments(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	conn := listen(t, dbURL)

	first := []payments.Payment{payment(1, 0, big.NewInt(5)), payment(1, 1, big.NewInt(6)), payment(2, 0, maxUint256())}
	ins, err := insertAndCommit(t, s, first, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// Only duplicates: no notification. Rolled back: no notification.
	if _, err := insertAndCommit(t, s, first, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, err := insertAndCommit(t, s, []payments.Payment{payment(9, 0, big.NewInt(1))}, nil, false); err != nil {
		t.Fatal(err)
	}
	// One new among duplicates: one notification, for it alone.
	ins2, err := insertAndCommit(t, s, append(first, payment(3, 0, big.NewInt(7))), nil, true)
	if err != nil {
		t.Fatal(err)
	}

	got := drain(t, conn)
	if len(got) != 2 {
		t.Fatalf("%d notifications, want 2: %+v", len(got), got)
	}
	if got[0].Count != 3 || got[0].FirstID != ins[0].ID || got[0].LastID != ins[2].ID || len(got[0].Payments) != 3 {
		t.Fatalf("first notification = %+v", got[0])
	}
	if got[0].Payments[2].Amount != maxUint256().String() || got[0].ChainID != 1337 {
		t.Fatalf("first notification's payments = %+v", got[0].Payments)
	}
	if got[1].Count != 1 || got[1].FirstID != ins2[0].ID || got[1].Payments[0].TxHash != payment(3, 0, nil).TxHash {
		t.Fatalf("second notification = %+v", got[1])
	}
}

func TestLargeNotificationsCarryTheIDRangeOnly(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	conn := listen(t, dbURL)
	var ps []payments.Payment
	for i := range 200 {
		ps = append(ps, payment(byte(i%16), uint32(i), big.NewInt(int64(i+1))))
	}
	ins, err := insertAndCommit(t, s, ps, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	got := drain(t, conn)
	if len(got) != 1 || got[0].Count != 200 || got[0].Payments != nil || got[0].FirstID != ins[0].ID || got[0].LastID != ins[199].ID {
		t.Fatalf("notifications = %+v", got)
	}
}

const creditHook = `INSERT INTO balances (payer, amount) VALUES ($8, $10)
	ON CONFLICT (payer) DO UPDATE SET amount = balances.amount + EXCLUDED.amount`

func TestHookCreditsOncePerNewPayment(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE balances (payer text PRIMARY KEY, amount numeric(78,0) NOT NULL CHECK (amount < 1000))`); err != nil {
		t.Fatal(err)
	}
	hook, err := s.PrepareHook(ctx, creditHook)
	if err != nil {
		t.Fatal(err)
	}
	ps := []payments.Payment{payment(1, 0, big.NewInt(5)), payment(1, 1, big.NewInt(6))}
	for range 3 { // the same range three times: credited once
		if _, err := insertAndCommit(t, s, ps, hook, true); err != nil {
			t.Fatal(err)
		}
	}
	// A hook that fails rolls the whole transaction back: no payment, no credit.
	if _, err := insertAndCommit(t, s, []payments.Payment{payment(2, 0, big.NewInt(5000))}, hook, true); err == nil {
		t.Fatal("a failing hook did not fail the transaction")
	}
	var balance string
	if err := pool.QueryRow(ctx, `SELECT amount::text FROM balances WHERE payer = $1`, ps[0].Payer).Scan(&balance); err != nil {
		t.Fatal(err)
	}
	if balance != "11" {
		t.Fatalf("balance = %s, want 11", balance)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d payments, want 2 (the failed hook's payment rolled back)", n)
	}
}

func TestPrepareHookRejectsBadStatements(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	for _, sql := range []string{
		"INSERT INTO no_such_table VALUES ($1)",
		"SELECT $12",
		"SELECT 1; SELECT 2",
		"not sql",
	} {
		if _, err := s.PrepareHook(context.Background(), sql); !errors.Is(err, payments.ErrBadHook) {
			t.Errorf("PrepareHook(%q) = %v, want ErrBadHook", sql, err)
		}
	}
	if _, err := s.PrepareHook(context.Background(), "SELECT $1::bigint, $11"); err != nil {
		t.Fatalf("a statement using some parameters: %v", err)
	}
}

func TestHookCannotEndTheTransactionOrLiftItsBounds(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	ctx := context.Background()
	for _, sql := range []string{"COMMIT", "  -- note\n ROLLBACK", "SET statement_timeout = 0", "BEGIN", "/* x */ END"} {
		if _, err := s.PrepareHook(ctx, sql); !errors.Is(err, payments.ErrBadHook) {
			t.Errorf("PrepareHook(%q) = %v, want ErrBadHook", sql, err)
		}
	}
	// A SELECT that lifts the timeouts gets them back after it runs.
	hook, err := s.PrepareHook(ctx, `SELECT set_config('statement_timeout', '0', true), $1::bigint`)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ins, err := tx.InsertPayments(ctx, []payments.Payment{payment(1, 0, big.NewInt(5))})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.RunHook(ctx, hook, ins); err != nil {
		t.Fatal(err)
	}
	var timeout string
	if err := tx.QueryRowForTest(ctx, `SHOW statement_timeout`).Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "5s" {
		t.Fatalf("statement_timeout after the hook = %s, want the transaction's 5s", timeout)
	}
}
