package payments_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestAWriterMidTransactionHoldsNothingAnotherGroupNeeds: group A's writer
// has inserted payments, staged events and read the chain's head, and then
// stops talking (a frozen or partitioned replica: its session sits idle in
// the transaction). Group B, another contract on the same chain, records
// payments, events and the head and commits within a lock wait far shorter
// than A's transaction lives; its events are numbered first, because it
// commits first. When A commits, its events follow, gap-free.
func TestAWriterMidTransactionHoldsNothingAnotherGroupNeeds(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	contractB := "0x" + strings.Repeat("ef", 20)
	record := func(tx *payments.Tx, ps []payments.Payment, head int64) {
		t.Helper()
		if _, err := tx.InsertPayments(ctx, ps); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindSeen, ps[0], 0)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.SetHead(ctx, ps[0].ChainID, head, "0x"+strings.Repeat("0a", 32)); err != nil {
			t.Fatal(err)
		}
	}
	a, err := s.Begin(ctx, payments.Limits{LockWait: time.Minute, TxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback()
	pa := []payments.Payment{payment(1, 0, big.NewInt(10)), payment(1, 1, big.NewInt(11))}
	pa[1].BlockNumber = 8
	record(a, pa, 20)

	// B waits at most 100 ms for any lock, and its whole transaction
	// lives 2 s: holding A's counter or head row would fail it.
	b, err := s.Begin(ctx, payments.Limits{LockWait: 100 * time.Millisecond, TxTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback()
	pb := []payments.Payment{payment(2, 0, big.NewInt(20))}
	pb[0].Contract = contractB
	record(b, pb, 21)
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("group B's commit while A's transaction is open: %v", err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	evs, err := s.Events(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		seq      int64
		kind, tx string
		index    uint32
	}
	want := []ev{
		// B committed first: its events come first, the confirmed
		// before the seen, in the order the transaction wrote them.
		{1, payments.KindConfirmed, pb[0].TxHash, 0},
		{2, payments.KindSeen, pb[0].TxHash, 0},
		{3, payments.KindConfirmed, pa[0].TxHash, 0},
		{4, payments.KindConfirmed, pa[1].TxHash, 1},
		{5, payments.KindSeen, pa[0].TxHash, 0},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if got := (ev{e.Seq, e.Kind, e.TxHash, e.LogIndex}); got != want[i] {
			t.Fatalf("event %d = %+v, want %+v", i, got, want[i])
		}
	}
	var last, head int64
	var staged, commits int
	if err := pool.QueryRow(ctx, `SELECT (SELECT last_seq FROM payment_event_seq),
		(SELECT block_number FROM chain_heads WHERE chain_id = 1337),
		(SELECT count(*) FROM payment_events_staged), (SELECT count(*) FROM ledger_commits)`).Scan(&last, &head, &staged, &commits); err != nil {
		t.Fatal(err)
	}
	// The head is the last committed one (A's), and nothing stays staged.
	if last != 5 || head != 20 || staged != 0 || commits != 0 {
		t.Fatalf("counter %d, head %d, %d staged, %d commit rows; want 5, 20, 0, 0", last, head, staged, commits)
	}
}

// TestARolledBackWriterLeavesNothingStaged: events staged by a transaction
// that rolls back, or whose session dies, are never numbered or seen.
func TestARolledBackWriterLeavesNothingStaged(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.InsertPayments(ctx, []payments.Payment{payment(3, 0, big.NewInt(1))}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	tx, err = s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindSeen, payment(4, 0, big.NewInt(2)), 0)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Seq != 1 || evs[0].TxHash != payment(4, 0, nil).TxHash {
		t.Fatalf("events %+v, want only the committed seen as seq 1", evs)
	}
	var staged int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payment_events_staged`).Scan(&staged); err != nil || staged != 0 {
		t.Fatalf("%d staged rows (%v), want 0", staged, err)
	}
}

// TestACommitReadsOnlyItsOwnStagedRows: while a snapshot older than them
// is open (another group's frozen writer, a slow consumer, a pg_dump), the
// rows earlier commits staged and deleted stay in payment_events_staged
// and ledger_commits as dead rows. A commit finds its own rows by its own
// transaction id instead of reading those tables whole: the pages it
// touches, and the time it holds the event counter, do not grow with
// other transactions' dead rows. Before, each commit read every page of
// both tables.
func TestACommitReadsOnlyItsOwnStagedRows(t *testing.T) {
	t.Parallel()
	pool, dbURL := pgtest.NewPool(t)
	ctx := context.Background()
	// The old snapshot: a transaction that has read something, and waits.
	old, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	if _, err := old.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM payment_events`); err != nil {
		t.Fatal(err)
	}
	s := payments.NewStore(pool)
	n := 0
	for range 20 {
		evs := make([]payments.Event, 2000)
		for i := range evs {
			n++
			p := payment(byte(n), uint32(n), big.NewInt(int64(n)))
			p.TxHash = fmt.Sprintf("0x%064x", n)
			evs[i] = payments.EventFor(payments.KindSeen, p, 0)
		}
		if err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
			_, err := tx.AppendEvents(ctx, evs)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// One session does the small commit and reads what it touched: the
	// statistics of a backend are its own until flushed, and flushed when
	// it is asked to and goes idle.
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	blocks := func() (touched int64, pages int64) {
		t.Helper()
		if _, err := one.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		if err := one.QueryRow(ctx, `SELECT sum(coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0))::bigint,
			sum(pg_relation_size(relid) / current_setting('block_size')::int)::bigint
			FROM pg_statio_user_tables WHERE relname IN ('payment_events_staged', 'ledger_commits')`).Scan(&touched, &pages); err != nil {
			t.Fatal(err)
		}
		return touched, pages
	}
	before, pages := blocks()
	if pages < 500 {
		t.Fatalf("the staged tables hold %d pages of dead rows, want at least 500 for the test to mean anything", pages)
	}
	p := payment(1, 1, big.NewInt(1))
	p.TxHash = fmt.Sprintf("0x%064x", n+1)
	if err := inTx(payments.NewStore(one), func(ctx context.Context, tx *payments.Tx) error {
		_, err := tx.AppendEvents(ctx, []payments.Event{payments.EventFor(payments.KindSeen, p, 0)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	after, _ := blocks()
	if touched := after - before; touched > 20 {
		t.Fatalf("a one-event commit touched %d pages of the staged tables' %d, want a handful: it read other transactions' dead rows", touched, pages)
	}
	var last int64
	if err := pool.QueryRow(ctx, `SELECT max(seq) FROM payment_events`).Scan(&last); err != nil || last != int64(n+1) {
		t.Fatalf("last seq %d (%v), want %d", last, err, n+1)
	}
}
