package payments_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// BenchmarkInsertPayments inserts ranges of 2000 new payments in one
// statement each, in a transaction, as the poller does, into the real table
// with its constraints and indexes.
func BenchmarkInsertPayments(b *testing.B) {
	pool, _ := pgtest.NewPool(b)
	s := payments.NewStore(pool)
	ctx := context.Background()
	const perRange = 2000
	n := 0
	batch := func() []payments.Payment {
		ps := make([]payments.Payment, perRange)
		for i := range ps {
			n++
			ps[i] = payments.Payment{
				ChainID: 1337, Contract: "0x" + strings.Repeat("ab", 20),
				TxHash: fmt.Sprintf("0x%064x", n), LogIndex: uint32(i % 7), BlockNumber: int64(n / 500),
				BlockHash: "0x" + strings.Repeat("cd", 32), Payer: fmt.Sprintf("0x%040x", n%97),
				Digest: fmt.Sprintf("0x%064x", n*31), Amount: big.NewInt(int64(n) * 1_000_003), BurnedAt: time.Unix(1_700_000_000, 0),
			}
		}
		return ps
	}
	b.ReportAllocs()
	for b.Loop() {
		ps := batch()
		tx, err := s.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ins, err := tx.InsertPayments(ctx, ps)
		if err != nil || len(ins) != perRange {
			b.Fatalf("inserted %d: %v", len(ins), err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(perRange*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkRecordRange is what a writer does per range of 2000 new
// payments: insert them with their confirmed events (the plain insert of
// payments the ledger check found new), and, as writers do, settle the
// pending rows of the range first; committed.
func BenchmarkRecordRange(b *testing.B) {
	for _, step := range []string{"insert", "pending+insert"} {
		b.Run(step, func(b *testing.B) {
			pool, _ := pgtest.NewPool(b)
			s := payments.NewStore(pool)
			ctx := context.Background()
			const perRange = 2000
			n := 0
			b.ReportAllocs()
			cpu := postgresCPU()
			for b.Loop() {
				ps := make([]payments.Payment, perRange)
				for i := range ps {
					n++
					ps[i] = payments.Payment{
						ChainID: 1337, Contract: "0x" + strings.Repeat("ab", 20),
						TxHash: fmt.Sprintf("0x%064x", n), LogIndex: uint32(i % 7), BlockNumber: int64(n / 500),
						BlockHash: "0x" + strings.Repeat("cd", 32), Payer: fmt.Sprintf("0x%040x", n%97),
						Digest: fmt.Sprintf("0x%064x", n*31), Amount: big.NewInt(int64(n) * 1_000_003), BurnedAt: time.Unix(1_700_000_000, 0),
					}
				}
				tx, err := s.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if step != "insert" {
					if _, err := tx.TakePending(ctx, 1337, []string{ps[0].Contract}, ps[0].BlockNumber, ps[len(ps)-1].BlockNumber, ps); err != nil {
						b.Fatal(err)
					}
				}
				ins, err := tx.InsertNewPayments(ctx, ps)
				if err != nil || len(ins) != perRange {
					b.Fatalf("inserted %d: %v", len(ins), err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(perRange*b.N)/b.Elapsed().Seconds(), "rows/s")
			reportPostgresCPU(b, cpu, perRange*b.N)
		})
	}
}

// BenchmarkCommitBesideAnOldSnapshot is a one-event commit after another
// group recorded 150 ranges of 2,000 events while a snapshot older than
// them stayed open (a frozen writer, a slow consumer, a pg_dump), whose
// dead staged rows vacuum cannot remove: the numbering at commit, which
// holds the event counter, must not read them.
func BenchmarkCommitBesideAnOldSnapshot(b *testing.B) {
	pool, dbURL := pgtest.NewPool(b)
	s := payments.NewStore(pool)
	ctx := context.Background()
	old, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer old.Close(ctx)
	if _, err := old.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM payment_events`); err != nil {
		b.Fatal(err)
	}
	n := 0
	event := func() payments.Event {
		n++
		return payments.EventFor(payments.KindSeen, payments.Payment{
			ChainID: 1337, Contract: "0x" + strings.Repeat("ab", 20),
			TxHash: fmt.Sprintf("0x%064x", n), BlockNumber: int64(n / 500),
			BlockHash: "0x" + strings.Repeat("cd", 32), Payer: fmt.Sprintf("0x%040x", n%97),
			Digest: fmt.Sprintf("0x%064x", n*31), Amount: big.NewInt(int64(n)), BurnedAt: time.Unix(1_700_000_000, 0),
		}, 0)
	}
	commit := func(evs []payments.Event) {
		tx, err := s.Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.AppendEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for range 150 {
		evs := make([]payments.Event, 2000)
		for i := range evs {
			evs[i] = event()
		}
		commit(evs)
	}
	for b.Loop() {
		commit([]payments.Event{event()})
	}
}
