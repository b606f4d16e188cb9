package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

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
	if code := run([]string{"events", "--since", "4"}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), "seq=5 kind=seen chain=1337 tx=0x") || !strings.Contains(out.String(), " amount=5 payment=-\n") {
		t.Fatalf("table form: exit %d, %q", code, out.String())
	}
	for _, bad := range [][]string{{"events", "--since", "-2"}, {"events", "x"}, {"tail", "--nope"}} {
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
	p := &eventPrinter{store: payments.NewStore(pool), w: out, asJSON: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			_ = p.follow(ctx, pool)
		}
		done <- nil
	}()
	defer func() { cancel(); <-done }()
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for len(seqsPrinted(t, out.String())) < n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %d events; printed %v", n, seqsPrinted(t, out.String()))
			}
			time.Sleep(10 * time.Millisecond)
		}
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
