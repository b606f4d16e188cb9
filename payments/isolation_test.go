package payments_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

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
