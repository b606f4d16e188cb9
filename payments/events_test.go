package payments_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	if got := appendCommitted(t, s, ev(0, payments.KindSeen), ev(1, payments.KindSeen)); len(got) != 2 {
		t.Fatalf("recorded %v", got)
	}
	// ev(1) again, twice in one call, between two new ones.
	if got := appendCommitted(t, s, ev(2, payments.KindSeen), ev(1, payments.KindSeen), ev(1, payments.KindSeen), ev(0, payments.KindConfirmed)); len(got) != 4 {
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

// TestAWriterOfTheLastReleaseStillGetsItsEventsNumbered: during a rolling
// upgrade a replica of the release before migration 15 writes as it did:
// its ledger_commits rows say nothing of events (the head's row alone when
// head tracking recorded the head first, a bare row otherwise). Its staged
// events are numbered and moved at its COMMIT all the same, after the
// events already recorded, and the staged table is left empty. A row that
// says no events were staged (this release's head alone) numbers nothing.
func TestAWriterOfTheLastReleaseStillGetsItsEventsNumbered(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	stage := func(tx pgx.Tx, n int) {
		t.Helper()
		if _, err := tx.Exec(ctx, `
			INSERT INTO payment_events_staged (ord, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
			                                   block_hash, payer, digest, amount, burned_at)
			SELECT g, 'old:' || $1::int || ':' || g, 'seen', 1337, '0x' || repeat('ab', 20), '0x' || repeat('01', 32), g, 7,
			       '0x' || repeat('cd', 32), '0x' || repeat('12', 20), '0x' || repeat('34', 32), 5, now()
			FROM generate_series(1, 2) g`, n); err != nil {
			t.Fatal(err)
		}
	}
	for i, mark := range []string{
		`INSERT INTO ledger_commits (head_chain_id, head_block, head_hash) VALUES (1337, 90, '0x` + strings.Repeat("ee", 32) + `')`,
		`INSERT INTO ledger_commits (head_chain_id) SELECT NULL`,
	} {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			stage(tx, i)
			_, err := tx.Exec(ctx, mark)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// This release: the head alone, then nothing staged.
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.SetHead(ctx, 1337, 91, "0x"+strings.Repeat("ef", 32)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows, err := pool.Query(ctx, `SELECT seq || ' ' || event_id FROM payment_events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1 old:0:1", "2 old:0:2", "3 old:1:1", "4 old:1:2"}; !slices.Equal(got, want) {
		t.Fatalf("payment_events %v, want %v", got, want)
	}
	var staged, last, head int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM payment_events_staged), (SELECT last_seq FROM payment_event_seq),
		(SELECT block_number FROM chain_heads WHERE chain_id = 1337)`).Scan(&staged, &last, &head); err != nil {
		t.Fatal(err)
	}
	if staged != 0 || last != 4 || head != 91 {
		t.Fatalf("staged rows %d, counter %d, head %d; want 0, 4, 91", staged, last, head)
	}
}

// TestAnIDStagedTwiceInOneTransactionIsItsSecondOccurrence: a transaction
// whose staged ids are all new numbers them in one insert; one that stages
// a new id twice (none recorded before) takes the general path, which gives
// the first staged the id and the second <id>:2, with the seqs in staging
// order either way and the staged table left empty.
func TestAnIDStagedTwiceInOneTransactionIsItsSecondOccurrence(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	seen := func(i int) payments.Event {
		return payments.EventFor(payments.KindSeen, payment(2, uint32(i), big.NewInt(int64(i))), 0)
	}
	appendCommitted(t, s, seen(0), seen(1))          // all new: one insert
	appendCommitted(t, s, seen(2), seen(3), seen(2)) // seen(2) twice, new: the general path
	evs, err := s.Events(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d %s", e.Seq, e.EventID))
	}
	want := []string{"1 " + seen(0).EventID, "2 " + seen(1).EventID, "3 " + seen(2).EventID, "4 " + seen(3).EventID, "5 " + seen(2).EventID + ":2"}
	if !slices.Equal(got, want) {
		t.Fatalf("payment_events %v, want %v", got, want)
	}
	var staged, last int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM payment_events_staged), (SELECT last_seq FROM payment_event_seq)`).Scan(&staged, &last); err != nil {
		t.Fatal(err)
	}
	if staged != 0 || last != 5 {
		t.Fatalf("staged rows %d, counter %d; want 0, 5", staged, last)
	}
}

// TestACounterBehindItsEventsFailsTheCommit: the numbering falls back to
// the general path only when an event id repeats. A counter behind the
// seqs already used (a damaged ledger) fails the commit, with every row of
// the transaction rolled back, rather than numbering anything twice.
func TestACounterBehindItsEventsFailsTheCommit(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	record := func(p payments.Payment) error {
		return inTx(s, func(ctx context.Context, tx *payments.Tx) error {
			_, err := tx.InsertPayments(ctx, []payments.Payment{p})
			return err
		})
	}
	if err := record(payment(3, 0, big.NewInt(10))); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE payment_event_seq SET last_seq = last_seq - 1`); err != nil {
		t.Fatal(err)
	}
	err := record(payment(3, 1, big.NewInt(11)))
	if err == nil || !strings.Contains(err.Error(), "payment_events_pkey") {
		t.Fatalf("commit with the counter behind = %v, want the seq's unique violation", err)
	}
	var paid, events, staged int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM payment_events),
		(SELECT count(*) FROM payment_events_staged)`).Scan(&paid, &events, &staged); err != nil {
		t.Fatal(err)
	}
	if paid != 1 || events != 1 || staged != 0 {
		t.Fatalf("payments %d, events %d, staged %d; want 1, 1, 0", paid, events, staged)
	}
}

// appendCommitted stages evs in a transaction of their own and commits it;
// it returns their kinds.
func appendCommitted(t *testing.T, s *payments.Store, evs ...payments.Event) []string {
	t.Helper()
	var kinds []string
	if err := inTx(s, func(ctx context.Context, tx *payments.Tx) (err error) {
		kinds, err = tx.AppendEvents(ctx, evs)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return kinds
}

// inTx runs fn in a transaction of s and commits it, unless fn fails.
func inTx(s *payments.Store, fn func(context.Context, *payments.Tx) error) error {
	ctx := context.Background()
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TestNewEventsAreMovedInOneInsert tells which numbering ran: the one insert
// of new events runs in a subtransaction of the commit, so its rows carry
// an xmin no payment carries; the general numbering, which runs when an id
// repeats, inserts under the transaction's own, that of the payments it
// inserted.
func TestNewEventsAreMovedInOneInsert(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	p0, p1, p2 := payment(5, 0, big.NewInt(1)), payment(5, 1, big.NewInt(2)), payment(5, 2, big.NewInt(3))
	var first []payments.Inserted
	if err := inTx(s, func(ctx context.Context, tx *payments.Tx) (err error) {
		first, err = tx.InsertPayments(ctx, []payments.Payment{p0, p1})
		return err
	}); err != nil || len(first) != 2 {
		t.Fatalf("inserted %d: %v", len(first), err)
	}
	// p0's confirmed event again (a later occurrence), then p2's.
	again := payments.EventFor(payments.KindConfirmed, p0, first[0].ID)
	if err := inTx(s, func(ctx context.Context, tx *payments.Tx) error {
		if _, err := tx.AppendEvents(ctx, []payments.Event{again}); err != nil {
			return err
		}
		_, err := tx.InsertPayments(ctx, []payments.Payment{p2})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `
		SELECT e.seq || ' ' || e.event_id || ' ' ||
		       CASE WHEN EXISTS (SELECT 1 FROM payments p WHERE p.xmin = e.xmin) THEN 'general' ELSE 'one insert' END
		FROM payment_events e ORDER BY e.seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	ev := func(p payments.Payment) string { return payments.EventFor(payments.KindConfirmed, p, 1).EventID }
	want := []string{"1 " + ev(p0) + " one insert", "2 " + ev(p1) + " one insert", "3 " + ev(p0) + ":2 general", "4 " + ev(p2) + " general"}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHistoryHashChainsTheLog: every event carries the history of the log
// up to the end of its commit (migration 18): sha256 of the history before
// the commit and the ids the commit numbered, in seq order, each followed
// by a newline, whichever way the commit numbered them (the one insert of
// new ids, or the general numbering of an id that repeats, whose ids end
// in :<n>). A log that lost its tail and numbered other events there has
// another history from the first seq that changed on, even where the same
// event came back to the same seq.
func TestHistoryHashChainsTheLog(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	ev := func(i int) payments.Event {
		return payments.EventFor(payments.KindSeen, payment(1, uint32(i), big.NewInt(int64(i))), 0)
	}
	appendCommitted(t, s, ev(0), ev(1))
	appendCommitted(t, s, ev(2), ev(1), ev(1)) // a repeated id: the general numbering
	appendCommitted(t, s, ev(3))
	check := func(commits [][]int64) []string {
		t.Helper()
		evs, err := s.Events(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		bySeq := map[int64]payments.Event{}
		for _, e := range evs {
			bySeq[e.Seq] = e
		}
		var prior []byte
		var out []string
		for _, commit := range commits {
			h := sha256.New()
			h.Write(prior)
			for _, seq := range commit {
				h.Write([]byte(bySeq[seq].EventID + "\n"))
			}
			prior = h.Sum(nil)
			for _, seq := range commit {
				if got := bySeq[seq].History; got != hex.EncodeToString(prior) {
					t.Fatalf("event %d's history %s, want %x", seq, got, prior)
				}
				out = append(out, bySeq[seq].History)
			}
		}
		return out
	}
	before := check([][]int64{{1, 2}, {3, 4, 5}, {6}})
	if !strings.HasSuffix(must(s.Events(ctx, 3, 1))[0].EventID, ":2") {
		t.Fatal("the second commit did not take the general numbering")
	}
	// The tail after seq 2 is lost (an asynchronous failover) and other
	// events are numbered at 3 and 4.
	if _, err := pool.Exec(ctx, `DELETE FROM payment_events WHERE seq > 2; UPDATE payment_event_seq SET last_seq = 2`); err != nil {
		t.Fatal(err)
	}
	appendCommitted(t, s, ev(1), ev(2))
	after := check([][]int64{{1, 2}, {3, 4}})
	if before[0] != after[0] || before[1] != after[1] || before[2] == after[2] {
		t.Fatalf("histories %v then %v: want the first commit's kept and the third seq's changed", before, after)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
