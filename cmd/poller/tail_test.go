package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tailWaitFor polls cond until it holds or timeout passes; the timeout is a
// guard against a hung test, not a bound under test.
func tailWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tailHex returns n random bytes in 0x hex.
func tailHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return "0x" + hex.EncodeToString(b)
}

// tailInsert inserts one payment through q with a random transaction hash
// and the given amount and returns its id.
func tailInsert(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, amount int64) int64 {
	t.Helper()
	var id int64
	if err := q.QueryRow(context.Background(), `INSERT INTO payments
		(chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		VALUES (1337, $1, $2, 0, 7, $3, $4, $5, $6, now()) RETURNING id`,
		tailHex(20), tailHex(32), tailHex(32), tailHex(20), tailHex(32), amount).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// tailNotify sends payload on the payments channel through q, as any
// session may.
func tailNotify(t *testing.T, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, payload string) {
	t.Helper()
	if _, err := q.Exec(context.Background(), `SELECT pg_notify($1, $2)`, payments.NotifyChannel, payload); err != nil {
		t.Fatal(err)
	}
}

// noteFor is the payload the poller sends for the payments with ids
// [first, last].
func noteFor(first, last int64) string {
	b, _ := json.Marshal(payments.Notification{ChainID: 1337, Contract: "0x" + strings.Repeat("ab", 20),
		Count: int(last - first + 1), FirstID: first, LastID: last})
	return string(b)
}

// startTail runs a tailer on pool until the test ends and waits until it
// listens.
func startTail(t *testing.T, pool *pgxpool.Pool) *lockedBuffer {
	t.Helper()
	out := &lockedBuffer{}
	tl := &tailer{store: payments.NewStore(pool), w: out, asJSON: true, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.listen(ctx, pool) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	tailWaitFor(t, time.Minute, "tail to listen", func() bool {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'LISTEN %'`).Scan(&n)
		return err == nil && n == 1
	})
	return out
}

// printedIDList is the ids out printed, in order.
func printedIDList(t *testing.T, out *lockedBuffer) []int64 {
	t.Helper()
	var ids []int64
	for line := range strings.Lines(out.String()) {
		var it payments.NotifiedItem
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids = append(ids, it.ID)
	}
	return ids
}

// TestTailPrintsOnlyWhatTheTableHolds: tail prints nothing committed before
// it started and nothing a forged notification says, only rows of the
// payments table, each once, including a backfill's ids that commit after
// higher ones.
func TestTailPrintsOnlyWhatTheTableHolds(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	var old []int64
	for i := range 3 {
		old = append(old, tailInsert(t, pool, int64(100+i)))
	}
	out := startTail(t, pool)

	// Forged: a made-up payment, a range naming the old rows, garbage.
	fakeHash, fakeAmount := tailHex(32), "987654321987654321"
	forged, _ := json.Marshal(payments.Notification{ChainID: 1337, Contract: tailHex(20), Count: 1, FirstID: 424242, LastID: 424242,
		Payments: []payments.NotifiedItem{{ID: 424242, TxHash: fakeHash, Payer: tailHex(20), Digest: tailHex(32), Amount: fakeAmount}}})
	tailNotify(t, pool, string(forged))
	tailNotify(t, pool, noteFor(old[0], old[2]))
	tailNotify(t, pool, "not json at all")

	// A live transaction commits while a backfill transaction, which took
	// its id first, is still open.
	backfill, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer backfill.Rollback(ctx)
	late := tailInsert(t, backfill, 2)
	live, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Rollback(ctx)
	early := tailInsert(t, live, 3)
	tailNotify(t, live, noteFor(early, early))
	if err := live.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tailWaitFor(t, time.Minute, "the live payment", func() bool { return len(printedIDList(t, out)) >= 1 })
	tailNotify(t, backfill, noteFor(late, late))
	if err := backfill.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Forged again: a range over everything printed.
	tailNotify(t, pool, noteFor(0, 1<<40))
	// The last real payment: notifications arrive in commit order, so
	// once it is printed every one before it was handled.
	last := tailInsert(t, pool, 4)
	tailNotify(t, pool, noteFor(last, last))
	tailWaitFor(t, time.Minute, "the last payment", func() bool { return slices.Contains(printedIDList(t, out), last) })

	if got, want := printedIDList(t, out), []int64{early, late, last}; !slices.Equal(got, want) {
		t.Fatalf("tail printed ids %v, want %v\n%s", got, want, out.String())
	}
	if s := out.String(); strings.Contains(s, fakeHash) || strings.Contains(s, fakeAmount) || strings.Contains(s, "424242") {
		t.Fatalf("tail printed the forged payment:\n%s", s)
	}
	// Each line is the row as the table holds it.
	rows, err := payments.NewStore(pool).PaymentsByID(ctx, late, last)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]payments.Recorded{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	for line := range strings.Lines(out.String()) {
		var it payments.NotifiedItem
		_ = json.Unmarshal([]byte(line), &it)
		r := byID[it.ID]
		want := payments.NotifiedItem{ID: r.ID, TxHash: r.TxHash, LogIndex: r.LogIndex, BlockNumber: r.BlockNumber,
			Payer: r.Payer, Digest: r.Digest, Amount: r.Amount.String()}
		if it != want {
			t.Errorf("printed %+v, the table holds %+v", it, want)
		}
	}
}

// TestTailCatchesUpWithoutANotification: a payment committed without a
// notification is printed at the next one, whatever that one says.
func TestTailCatchesUpWithoutANotification(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	out := startTail(t, pool)
	quiet := tailInsert(t, pool, 5)
	tailNotify(t, pool, "{}")
	tailWaitFor(t, time.Minute, "the quiet payment", func() bool { return len(printedIDList(t, out)) >= 1 })
	if got := printedIDList(t, out); !slices.Equal(got, []int64{quiet}) {
		t.Fatalf("tail printed ids %v, want [%d]", got, quiet)
	}
}

// TestPrintedIDsNeverRepeat: the record of printed ids stays within its
// bound by raising the floor, and never forgets an id as unprinted.
func TestPrintedIDsNeverRepeat(t *testing.T) {
	tests := []struct {
		name      string
		add       []int64
		wantFloor int64
		wantHas   []int64
		wantNot   []int64
	}{
		{name: "nothing printed", add: nil, wantFloor: 10, wantHas: []int64{1, 10}, wantNot: []int64{11, 12}},
		{name: "within the bound", add: []int64{12, 11, 14, 13}, wantFloor: 10, wantHas: []int64{11, 12, 13, 14}, wantNot: []int64{15, 100}},
		{name: "over the bound", add: []int64{11, 12, 13, 14, 15}, wantFloor: 13, wantHas: []int64{11, 12, 13, 14, 15}, wantNot: []int64{16}},
		{name: "a gap below the new floor", add: []int64{11, 13, 14, 15, 16}, wantFloor: 14, wantHas: []int64{12, 14, 16}, wantNot: []int64{17}},
		{name: "a gap above the floor", add: []int64{11, 12, 13, 15, 16}, wantFloor: 13, wantHas: []int64{13, 15, 16}, wantNot: []int64{14, 17}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPrintedIDs(10, 4)
			for _, id := range tt.add {
				p.add(id)
			}
			if p.floor != tt.wantFloor || len(p.ids) > 4 {
				t.Fatalf("floor %d with %d ids, want floor %d and at most 4", p.floor, len(p.ids), tt.wantFloor)
			}
			for _, id := range tt.wantHas {
				if !p.has(id) {
					t.Errorf("has(%d) = false, want true", id)
				}
			}
			for _, id := range tt.wantNot {
				if p.has(id) {
					t.Errorf("has(%d) = true, want false", id)
				}
			}
			if want := slices.Max(append([]int64{10}, tt.add...)); p.high != want {
				t.Errorf("high = %d, want %d", p.high, want)
			}
		})
	}
}
