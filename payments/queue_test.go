package payments_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// queueTestPages is how many 8 KiB pages of notifications the test queues:
// 2000 pages of a queue of 2^20 pages (8 GiB, Postgres' fixed size before
// 17 and its default since) is 0.0019 of it.
const queueTestPages = 2000

// TestNotificationQueueUsage pins the notification queue with a listener
// that stops consuming (it sits in an open transaction, where a session
// reads no notifications), queues about 16 MiB of notifications, and reads
// a usage of at least that much: the queue is freed only up to where the
// stuck listener stands, which is where it started listening, so other
// sessions of the server cannot bring it below. Once the listener goes, the
// usage drops again.
func TestNotificationQueueUsage(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	before, err := s.NotificationQueueUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before < 0 || before >= 1 {
		t.Fatalf("usage before = %v, want in [0, 1)", before)
	}

	stuck, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close(context.Background())
	if _, err := stuck.Exec(ctx, `LISTEN queue_usage_test`); err != nil {
		t.Fatal(err)
	}
	stuckTx, err := stuck.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stuckTx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}

	// One 8000-byte payload fills a page; payloads differ, as equal ones
	// in one transaction are folded into one.
	if _, err := pool.Exec(ctx, `SELECT pg_notify('queue_usage_test', g || repeat('x', 7990)) FROM generate_series(1, $1) g`, queueTestPages); err != nil {
		t.Fatal(err)
	}
	pinned, err := s.NotificationQueueUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.9 * queueTestPages / float64(1<<20); pinned < want || pinned > 1 {
		t.Fatalf("usage with a stuck listener = %v, want at least %v and at most 1", pinned, want)
	}

	// The listener leaves; the next notification moves the queue's tail.
	if err := stuck.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var after float64
	testharness.Wait(t, 30*time.Second, "the queue freed after the stuck listener left", func() bool {
		if _, err := pool.Exec(ctx, `SELECT pg_notify('queue_usage_test', 'tick')`); err != nil {
			t.Fatal(err)
		}
		if after, err = s.NotificationQueueUsage(ctx); err != nil {
			t.Fatal(err)
		}
		return after < pinned
	})
}

// TestLastPaymentID reads 0 from an empty ledger and the highest id after
// inserts.
func TestLastPaymentID(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	s := payments.NewStore(pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if id, err := s.LastPaymentID(ctx); err != nil || id != 0 {
		t.Fatalf("LastPaymentID on an empty ledger = %d, %v; want 0", id, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		SELECT 1337, '0x' || repeat('ab', 20), '0x' || lpad(to_hex(g), 64, '0'), 0, g, '0x' || repeat('cd', 32),
			'0x' || repeat('12', 20), '0x' || repeat('34', 32), g, now()
		FROM generate_series(1, 5) g`); err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := pool.QueryRow(ctx, `SELECT max(id) FROM payments`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if id, err := s.LastPaymentID(ctx); err != nil || id != want || want < 5 {
		t.Fatalf("LastPaymentID = %d, %v; want %d (of 5 payments)", id, err, want)
	}
}
