package payments_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// TestEventSeqIsGapFreeInCommitOrder runs the writers of six groups (a
// contract each, on two chains, each holding its own writers' lock) that
// stage events and then dawdle before committing, beside a reader that
// repeats "seq > last ORDER BY seq": the reader must never see a seq before
// every lower one is visible, and must end having seen each event exactly
// once.
func TestEventSeqIsGapFreeInCommitOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	const writers, txsEach = 6, 25
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written = map[string]bool{}
		failed  = make(chan error, writers)
	)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range txsEach {
				tx, err := s.Begin(ctx, payments.Limits{LockWait: 5 * time.Second, TxTimeout: 10 * time.Second})
				if err != nil {
					failed <- err
					return
				}
				chainID, contract := uint64(1337+w%2), fmt.Sprintf("0x%040x", w+1)
				if err := tx.LockWriters(ctx, chainID, []string{contract}); err != nil {
					failed <- err
					return
				}
				n := 1 + rng.IntN(3)
				evs := make([]payments.Event, n)
				for j := range evs {
					p := payment(byte(w), uint32(i*3+j), big.NewInt(int64(w*1000+i)))
					p.ChainID, p.Contract = chainID, contract
					p.TxHash = fmt.Sprintf("0x%064x", w*1_000_000+i*10+j)
					evs[j] = payments.EventFor(payments.KindSeen, p, 0)
				}
				if i%5 == 0 {
					// A transaction that rolls back after numbering
					// must leave no gap.
					if _, err := tx.AppendEvents(ctx, evs); err != nil {
						failed <- err
						return
					}
					tx.Rollback()
					continue
				}
				// In two calls, as a writer records range after range.
				if _, err := tx.AppendEvents(ctx, evs[:1]); err != nil {
					failed <- err
					return
				}
				time.Sleep(time.Duration(rng.IntN(2)) * time.Millisecond)
				if _, err := tx.AppendEvents(ctx, evs[1:]); err != nil {
					failed <- err
					return
				}
				// Hold the numbered events uncommitted for a moment.
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				if err := tx.Commit(ctx); err != nil {
					failed <- err
					return
				}
				mu.Lock()
				for _, e := range evs {
					written[e.EventID] = true
				}
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	seen := map[string]bool{}
	var last int64
	read := func() {
		evs, err := s.Events(ctx, last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq != last+1 {
				t.Fatalf("read seq %d after %d: a gap was visible", e.Seq, last)
			}
			if seen[e.EventID] {
				t.Fatalf("event %s read twice", e.EventID)
			}
			seen[e.EventID], last = true, e.Seq
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		read()
	}
	read()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	if len(seen) != len(written) {
		t.Fatalf("read %d events, %d committed", len(seen), len(written))
	}
	for id := range written {
		if !seen[id] {
			t.Fatalf("committed event %s never read", id)
		}
	}
	var max int64
	if err := pool.QueryRow(ctx, `SELECT last_seq FROM payment_event_seq`).Scan(&max); err != nil || max != last {
		t.Fatalf("counter at %d (%v), last event read %d", max, err, last)
	}
}

// TestAppendEventsNamesEachOccurrence: a step taken again (the same burn,
// kind and position: a burn seen again where it was seen before) is a new
// occurrence, recorded with the first free <id>:<n>, also when one
// transaction takes it twice; seqs stay consecutive and the notification
// names the last.
func TestAppendEventsNamesEachOccurrence(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+payments.EventsChannel); err != nil {
		t.Fatal(err)
	}
	ev := func(i int, kind string) payments.Event {
		p := payment(1, uint32(i), big.NewInt(int64(i)))
		id := int64(0)
		if kind == payments.KindConfirmed {
			id = int64(100 + i)
		}
		return payments.EventFor(kind, p, id)
	}
	appendAll := func(evs ...payments.Event) []string {
		tx, err := s.Begin(ctx, limits)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		kinds, err := tx.AppendEvents(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return kinds
	}
	if got := appendAll(ev(0, payments.KindSeen), ev(1, payments.KindSeen)); len(got) != 2 {
		t.Fatalf("recorded %v", got)
	}
	// ev(1) again, twice in one call, between two new ones.
	if got := appendAll(ev(2, payments.KindSeen), ev(1, payments.KindSeen), ev(1, payments.KindSeen), ev(0, payments.KindConfirmed)); len(got) != 4 {
		t.Fatalf("recorded %v, want four events", got)
	}
	evs, err := s.Events(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	again := ev(1, "seen").EventID
	want := []string{ev(0, "seen").EventID, again, ev(2, "seen").EventID, again + ":2", again + ":3", ev(0, "confirmed").EventID}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.EventID != want[i] {
			t.Fatalf("event %d: seq %d id %s, want seq %d id %s", i, e.Seq, e.EventID, i+1, want[i])
		}
	}
	if evs[5].PaymentID != 100 || evs[0].PaymentID != 0 || evs[5].Amount.Cmp(big.NewInt(0)) != 0 {
		t.Fatalf("payment ids %d/%d, amount %s", evs[5].PaymentID, evs[0].PaymentID, evs[5].Amount)
	}
	for _, want := range []string{`{"seq":2}`, `{"seq":6}`} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if err != nil || n.Payload != want {
			t.Fatalf("notification %v, %v; want %s", n, err, want)
		}
	}
}
