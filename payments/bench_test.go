package payments_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

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
// payments: insert them with their confirmed events, and, as writers do,
// settle the pending rows of the range first; committed.
func BenchmarkRecordRange(b *testing.B) {
	for _, step := range []string{"insert", "pending+insert"} {
		b.Run(step, func(b *testing.B) {
			pool, _ := pgtest.NewPool(b)
			s := payments.NewStore(pool)
			ctx := context.Background()
			const perRange = 2000
			n := 0
			b.ReportAllocs()
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
				ins, err := tx.InsertPayments(ctx, ps)
				if err != nil || len(ins) != perRange {
					b.Fatalf("inserted %d: %v", len(ins), err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(perRange*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
