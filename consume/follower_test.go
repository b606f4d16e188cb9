package consume_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestFollower: a follower returns the events after its position in seq
// order, in batches of at most BatchSize, skipping what its filter drops;
// then each event as it commits, woken by the notification (a forged one
// returns nothing); and it reports a table that lost its tail under it.
func TestFollower(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	var evs []payments.Event
	for i := 1; i <= 7; i++ {
		kind := payments.KindConfirmed
		if i == 3 || i == 7 {
			kind = payments.KindSeen
		}
		evs = append(evs, record(t, pool, makeEvent(i, spec{kind: kind}))...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after, err := consume.PositionAt(ctx, pool, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A poll interval longer than the test: only notifications wake it.
	f, err := consume.NewFollower(pool, after, consume.BatchSize(3), consume.Kinds(payments.KindConfirmed), consume.PollInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	next := func() []int64 {
		t.Helper()
		got, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seqs(got)
	}
	for i, want := range [][]int64{{2, 4}, {5, 6}} {
		if got := next(); !slices.Equal(got, want) {
			t.Fatalf("Next %d = %v, want %v", i, got, want)
		}
	}
	if got, want := f.Position(), (consume.Position{Seq: 7, EventID: evs[6].EventID}); got != want {
		t.Fatalf("Position = %+v, want %+v (past the filtered seq 7)", got, want)
	}
	// Forged notification, then a real event: Next returns the real one.
	execSQL(t, pool, `SELECT pg_notify($1, '{"seq":999}')`, payments.EventsChannel)
	done := make(chan []int64, 1)
	go func() {
		got, _ := f.Next(ctx)
		done <- seqs(got)
	}()
	record(t, pool, makeEvent(8, spec{kind: payments.KindConfirmed}))
	select {
	case got := <-done:
		if !slices.Equal(got, []int64{8}) {
			t.Fatalf("Next after a commit = %v, want [8]", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Next not woken by the commit's notification within 20s")
	}

	// The table loses 6-8 and numbers other events there.
	loseTail(t, pool, 5)
	burns(t, pool, 30, 3, payments.KindConfirmed)
	_, err = f.Next(ctx)
	d, ok := isDiverged(err)
	if !ok || !errors.Is(err, consume.ErrDiverged) || d.At.Seq != 8 || d.Found == "" || d.Found == d.At.EventID || d.Last != 8 {
		t.Fatalf("Next after the tail loss = %v (%+v), want a DivergedError at seq 8", err, d)
	}
	if f.Position().Seq != 8 {
		t.Fatalf("Position moved to %+v on the error", f.Position())
	}
}

// TestFollowerStopBeforeStart: Stop is safe without Start and twice; Next
// before Start is refused.
func TestFollowerStopBeforeStart(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	f, err := consume.NewFollower(pool, consume.Position{})
	if err != nil {
		t.Fatal(err)
	}
	f.Stop()
	f.Stop()
	if _, err := f.Next(context.Background()); err == nil {
		t.Fatal("Next before Start = nil error")
	}
}
