package consume_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// sink is an effect outside the database: what an at-least-once handler
// delivered, in order.
type sink struct {
	mu   sync.Mutex
	seqs []int64
	ids  []string
}

func (s *sink) add(e payments.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs = append(s.seqs, e.Seq)
	s.ids = append(s.ids, e.EventID)
}

func (s *sink) got() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seqs)
}

// TestRunAtLeastOnceRetriesFromTheFailure: the events handled before a
// failure keep their offset; the failing one is handed over again, then
// the rest, in seq order.
func TestRunAtLeastOnceRetriesFromTheFailure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	evs := burns(t, pool, 1, 5, payments.KindConfirmed)
	var (
		out  sink
		fail = true
	)
	h := func(ctx context.Context, e payments.Event) error {
		out.add(e)
		if e.Seq == 3 && fail {
			fail = false
			return errors.New("endpoint down")
		}
		return nil
	}
	r := start(t, func(ctx context.Context) error {
		return consume.RunAtLeastOnce(ctx, pool, "hook", h, quick(consume.BatchSize(10))...)
	})
	waitOffset(t, pool, "hook", 5)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := out.got(), []int64{1, 2, 3, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("handed over %v, want %v", got, want)
	}
	if got, want := offset(t, pool, "hook"), consume.PositionOf(evs[4]); got != want {
		t.Fatalf("offset %+v, want %+v", got, want)
	}
	// The lease is given up on return.
	if got := texts(t, pool, `SELECT coalesce(lease_owner, 'none') FROM consumer_offsets`); !slices.Equal(got, []string{"none"}) {
		t.Fatalf("lease owners %v after return, want none", got)
	}
}

// TestRunAtLeastOnceSharedName: while one consumer of a name holds the
// lease, another stands by; when the first stops (storing what it handled
// and giving up the lease) the second goes on from there: every event
// handed over once across the two.
func TestRunAtLeastOnceSharedName(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	burns(t, pool, 1, 4, payments.KindConfirmed)

	var a, b sink
	inside := make(chan struct{})
	var once sync.Once
	ha := func(ctx context.Context, e payments.Event) error {
		if e.Seq == 3 {
			once.Do(func() { close(inside) })
			<-ctx.Done() // stopped while delivering 3: not delivered
			return ctx.Err()
		}
		a.add(e)
		return nil
	}
	ra := start(t, func(ctx context.Context) error {
		return consume.RunAtLeastOnce(ctx, pool, "hook", ha, quick()...)
	})
	waitClosed(t, inside, "consumer a at seq 3")

	reports := make(chan consume.Progress, 100)
	rb := start(t, func(ctx context.Context) error {
		return consume.RunAtLeastOnce(ctx, pool, "hook", func(_ context.Context, e payments.Event) error {
			b.add(e)
			return nil
		}, quick(consume.OnProgress(func(p consume.Progress) {
			select {
			case reports <- p:
			default:
			}
		}))...)
	})
	// b stands by while a holds the lease (a has not stored 1-2 yet).
	p := waitProgress(t, reports, func(consume.Progress) bool { return true })
	if want := (consume.Progress{Name: "hook", Last: 4, Standby: true}); p != want {
		t.Fatalf("b's first report %+v, want %+v", p, want)
	}
	if err := ra.stop(t); err != nil {
		t.Fatal(err)
	}
	waitOffset(t, pool, "hook", 4)
	if err := rb.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := append(a.got(), b.got()...), []int64{1, 2, 3, 4}; !slices.Equal(got, want) || !slices.Equal(a.got(), []int64{1, 2}) {
		t.Fatalf("a delivered %v and b %v, want [1 2] and [3 4]", a.got(), b.got())
	}
}

// TestRunAtLeastOnceLeaseRunsOut: a lease left by a consumer that died is
// honoured until it runs out; then another consumer takes the name over.
func TestRunAtLeastOnceLeaseRunsOut(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	burns(t, pool, 1, 3, payments.KindConfirmed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := consume.Reset(ctx, pool, "hook", 1); err != nil {
		t.Fatal(err)
	}
	execSQL(t, pool, `UPDATE consumer_offsets SET lease_owner = 'dead/1/x', lease_until = clock_timestamp() + interval '2 seconds'`)
	var (
		out     sink
		standby = make(chan struct{})
		once    sync.Once
	)
	r := start(t, func(ctx context.Context) error {
		return consume.RunAtLeastOnce(ctx, pool, "hook", func(_ context.Context, e payments.Event) error {
			select {
			case <-standby:
			default:
				t.Errorf("seq %d handed over before the dead consumer's lease ran out", e.Seq)
			}
			out.add(e)
			return nil
		}, quick(consume.OnProgress(func(p consume.Progress) {
			if p.Standby {
				once.Do(func() { close(standby) })
			}
		}))...)
	})
	waitOffset(t, pool, "hook", 3)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := out.got(); !slices.Equal(got, []int64{2, 3}) {
		t.Fatalf("handed over %v, want [2 3]", got)
	}
}
