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
	if got, want := f.Position(), consume.PositionOf(evs[6]); got != want || got.History == "" {
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

// TestFollowerDetectsARenumberedEvent: a follower has handed over seqs 1 to
// 7, 6 being group A's burn X and 7 group B's Y. An asynchronous failover
// loses 6 and 7; the new primary numbers group C's new burn Z as 6, Y again
// as 7, under the same event_id, and X as 8. The event at the follower's
// position is the same one, but the events below it are not: Next says so,
// and Rewind goes back to 5, just before the oldest handed event the table
// no longer holds as handed, so that Z is handed over (Y and X again, under
// the ids they had). Checking the event at the position alone read on from
// 8, and Z was never handed over. Given only positions the table no longer
// holds, Rewind refuses rather than guess.
func TestFollowerDetectsARenumberedEvent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	burns(t, pool, 1, 5, payments.KindConfirmed)
	x := makeEvent(6, spec{kind: payments.KindConfirmed, contract: contractA})
	y := makeEvent(7, spec{kind: payments.KindConfirmed, contract: contractB})
	z := makeEvent(8, spec{kind: payments.KindConfirmed, contract: contractC})
	record(t, pool, x)
	record(t, pool, y)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := consume.NewFollower(pool, consume.Position{}, consume.NoListen(), consume.PollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	var handed []consume.Position
	for len(handed) < 7 {
		evs, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			handed = append(handed, consume.PositionOf(e))
		}
	}

	loseTail(t, pool, 5)
	record(t, pool, z)
	again := record(t, pool, y)
	record(t, pool, x)
	if again[0].Seq != 7 || again[0].EventID != handed[6].EventID {
		t.Fatalf("Y numbered again as %d %s, want 7 under its old id", again[0].Seq, again[0].EventID)
	}

	_, err = f.Next(ctx)
	d, ok := isDiverged(err)
	if !ok || d.At != handed[6] || d.Found != y.EventID || d.FoundHistory == d.At.History || d.Last != 8 {
		t.Fatalf("Next after the renumbering = %v (%+v), want a DivergedError at seq 7, the same event with another history", err, d)
	}
	if _, err := f.Rewind(ctx, handed[5:]); !errors.Is(err, consume.ErrBeyondHanded) || f.Position() != handed[6] {
		t.Fatalf("Rewind given only the changed positions = %v, position %+v; want ErrBeyondHanded, unmoved", err, f.Position())
	}
	to, err := f.Rewind(ctx, handed)
	if err != nil || to != handed[4] {
		t.Fatalf("Rewind = %+v, %v; want seq 5 as handed", to, err)
	}
	var ids []string
	for len(ids) < 3 {
		evs, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			ids = append(ids, e.EventID)
		}
	}
	if want := []string{z.EventID, y.EventID, x.EventID}; !slices.Equal(ids, want) {
		t.Fatalf("after Rewind: %v, want Z, Y, X", ids)
	}
}
