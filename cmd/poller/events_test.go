package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	testharness "github.com/burnpoller/burnpoller/internal/harness"
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

var eventN int

// recordEvents commits n confirmed-looking seen events in one transaction.
func recordEvents(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := payments.NewStore(pool).Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var evs []payments.Event
	for range n {
		eventN++
		evs = append(evs, payments.EventFor(payments.KindSeen, payments.Payment{
			ChainID: 1337, Contract: "0x" + strings.Repeat("ab", 20), TxHash: fmt.Sprintf("0x%064x", eventN), LogIndex: 0,
			BlockNumber: 5, BlockHash: "0x" + strings.Repeat("cd", 32), Payer: "0x" + strings.Repeat("12", 20),
			Digest: "0x" + strings.Repeat("34", 32), Amount: big.NewInt(int64(eventN)), BurnedAt: time.Unix(1_700_000_000, 0).UTC(),
		}, 0))
	}
	if _, err := tx.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// seqsPrinted are the seqs of out's JSON lines, in order.
func seqsPrinted(t *testing.T, out string) []int64 {
	t.Helper()
	var seqs []int64
	for line := range strings.Lines(out) {
		var e payments.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

func consecutive(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestEventsPrintsBySeq(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	t.Setenv("DATABASE_URL", dbURL)
	recordEvents(t, pool, 5)
	for _, tt := range []struct {
		args []string
		want []int64
	}{
		{[]string{"events", "--json"}, consecutive(1, 5)},
		{[]string{"events", "--json", "--since", "3"}, consecutive(4, 5)},
		{[]string{"events", "--json", "--since", "5"}, nil},
	} {
		var out, errOut bytes.Buffer
		if code := run(tt.args, &out, &errOut); code != 0 {
			t.Fatalf("%v exited %d: %s", tt.args, code, errOut.String())
		}
		if got := seqsPrinted(t, out.String()); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%v printed %v, want %v", tt.args, got, tt.want)
		}
	}
	var out, errOut bytes.Buffer
	// For a person: one short line (time, seq, kind, amount, payer and
	// tx shortened, block; no head recorded, so no confirmations); --json
	// has every value in full (eventline_test.go).
	if code := run([]string{"events", "--since", "4"}, &out, &errOut); code != 0 ||
		!strings.HasSuffix(out.String(), " #5 seen      5 0x1212…1212 0x0000…0005 @5\n") || utf8.RuneCountInString(out.String()) > lineWidth+1 {
		t.Fatalf("table form: exit %d, %q", code, out.String())
	}
	for _, bad := range [][]string{{"events", "--since", "-2"}, {"events", "--since", "6"}, {"events", "x"}, {"tail", "--nope"}} {
		if code := run(bad, &out, &errOut); code != exitUsage {
			t.Errorf("%v exited %d, want %d", bad, code, exitUsage)
		}
	}
}

// TestEventsFollowNeverMissesOrRepeats: --follow prints what was there,
// then every event as it commits, in seq order, ignoring forged
// notifications, and resumes after the last printed when its session is
// killed.
func TestEventsFollowNeverMissesOrRepeats(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	recordEvents(t, pool, 3)
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := followInBackground(ctx, t, pool, out, &lockedBuffer{})
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func(n int) {
		t.Helper()
		testharness.Wait(t, time.Minute, fmt.Sprintf("%d events printed", n), func() bool { return len(seqsPrinted(t, out.String())) >= n })
	}
	wait(3)
	for i := range 5 {
		recordEvents(t, pool, i+1)
		if _, err := pool.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.EventsChannel, `{"seq":999999}`); err != nil {
			t.Fatal(err)
		}
	}
	wait(18)
	// The session dies: it resumes after the last seq printed.
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN %'`); err != nil {
		t.Fatal(err)
	}
	recordEvents(t, pool, 4)
	wait(22)
	if got := seqsPrinted(t, out.String()); fmt.Sprint(got) != fmt.Sprint(consecutive(1, 22)) {
		t.Fatalf("printed %v, want 1..22 once each", got)
	}
}

// followInBackground runs events --follow --json from the first event,
// printing to out and logging to logs, until ctx ends.
func followInBackground(ctx context.Context, t *testing.T, pool *pgxpool.Pool, out, logs *lockedBuffer) <-chan error {
	t.Helper()
	p := &eventPrinter{store: payments.NewStore(pool), pool: pool, w: out, asJSON: true, now: time.Now}
	done := make(chan error, 1)
	go func() { done <- p.follow(ctx, consume.Position{}, pool, slog.New(slog.NewJSONHandler(logs, nil))) }()
	return done
}

// TestEventsFollowGoesOnAfterATailLoss: the follower printed seqs 1-4; an
// asynchronous failover lost seqs 3 and 4 and set the counter back, and the
// new primary numbers other events 3, 4 and 5. The follower notices, says
// so, and goes on after seq 2, the last it printed that the table still
// holds: it prints the new 3, 4 and 5, none of them skipped.
func TestEventsFollowGoesOnAfterATailLoss(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	recordEvents(t, pool, 4)
	out, logs := &lockedBuffer{}, &lockedBuffer{}
	done := followInBackground(ctx, t, pool, out, logs)
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	idsAt := func() map[int64]string {
		evs, err := payments.NewStore(pool).Events(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		m := map[int64]string{}
		for _, e := range evs {
			m[e.Seq] = e.EventID
		}
		return m
	}
	waitPrinted := func(n int) {
		t.Helper()
		testharness.Wait(t, time.Minute, fmt.Sprintf("%d events printed", n), func() bool { return len(seqsPrinted(t, out.String())) >= n })
	}
	waitPrinted(4)
	lost := idsAt()
	// The failover: the tail is gone, and the counter with it.
	if _, err := pool.Exec(ctx, `DELETE FROM payment_events WHERE seq > 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE payment_event_seq SET last_seq = 2`); err != nil {
		t.Fatal(err)
	}
	recordEvents(t, pool, 3)
	now := idsAt()
	if now[3] == lost[3] || now[4] == lost[4] {
		t.Fatal("the new primary's events have the lost ones' ids: the test proves nothing")
	}
	waitPrinted(7)
	var ids []string
	for line := range strings.Lines(out.String()) {
		var e payments.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.EventID)
	}
	want := []string{lost[1], lost[2], lost[3], lost[4], now[3], now[4], now[5]}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("printed %v, want %v", ids, want)
	}
	if !strings.Contains(logs.String(), "no longer holds events this command printed") || !strings.Contains(logs.String(), `"going_on_after_seq":2`) {
		t.Fatalf("no warning naming where it went on from:\n%s", logs.String())
	}
}

// TestEventsFollowStopsWhenItCannotTellWhereTheLogChanged: the follower
// started after seq 2 and printed 3 and 4; a failover lost 2 to 4 and the
// new primary numbered other events there. None of the events it printed
// is held as printed, and what was lost below them it never saw: it stops
// with one error saying to start again with --since, rather than guess
// where to go on (it went on after seq 1 before, by the table's word).
func TestEventsFollowStopsWhenItCannotTellWhereTheLogChanged(t *testing.T) {
	pool, _ := pgtest.NewPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recordEvents(t, pool, 4)
	start, err := consume.PositionAt(ctx, pool, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, logs := &lockedBuffer{}, &lockedBuffer{}
	p := &eventPrinter{store: payments.NewStore(pool), pool: pool, w: out, asJSON: true, now: time.Now}
	done := make(chan error, 1)
	go func() { done <- p.follow(ctx, start, pool, slog.New(slog.NewJSONHandler(logs, nil))) }()
	testharness.Wait(t, time.Minute, "seqs 3 and 4 printed", func() bool { return len(seqsPrinted(t, out.String())) >= 2 })
	if _, err := pool.Exec(ctx, `DELETE FROM payment_events WHERE seq > 1; UPDATE payment_event_seq SET last_seq = 1`); err != nil {
		t.Fatal(err)
	}
	recordEvents(t, pool, 4)
	select {
	case err := <-done:
		if !errors.Is(err, consume.ErrBeyondHanded) || !strings.Contains(err.Error(), "--since") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("follow = %v, want one line wrapping ErrBeyondHanded that names --since", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("follow went on without knowing where the log changed")
	}
	if got := seqsPrinted(t, out.String()); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("printed %v, want only 3 and 4", got)
	}
}
