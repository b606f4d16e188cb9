package webhooks

import (
	"context"
	"testing"

	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// BenchmarkGaugesBesideAForgottenEndpoint is what a replica pays each
// second for its webhook gauges when the database also holds the row of an
// endpoint no replica lists any more, 100,000 events behind (its URL left
// WEBHOOK_URL, its row was kept). "gauges" is what a replica reads now: its
// own endpoints, each by bounded lookups. "status" is what it read before
// (and what `poller webhooks status` still reads, once per run): every
// endpoint's status, counting the events above each watermark.
func BenchmarkGaugesBesideAForgottenEndpoint(b *testing.B) {
	pool, _ := pgtest.NewPool(b)
	ctx := context.Background()
	const events = 100_000
	for _, q := range []string{
		`INSERT INTO payment_events (seq, event_id, kind, chain_id, contract, tx_hash, log_index, block_number,
		                             block_hash, payer, digest, amount, burned_at)
		 SELECT g, 'e' || g, 'seen', 1, '0x' || repeat('a', 40), '0x' || lpad(to_hex(g), 64, '0'), 0, g,
		        '0x' || repeat('b', 64), '0x' || repeat('c', 40), '0x' || repeat('d', 64), 1, now()
		 FROM generate_series(1, 100000) g`,
		`UPDATE payment_event_seq SET last_seq = 100000`,
		`INSERT INTO webhook_endpoints (endpoint, events, enqueued_seq) VALUES
		     ('listed', '{seen,retracted,confirmed}', 100000), ('forgotten', '{seen,retracted,confirmed}', 0)`,
		`ANALYZE payment_events`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("gauges", func(b *testing.B) {
		for b.Loop() {
			g, err := gauges(ctx, pool, []string{"listed"})
			if err != nil || len(g) != 1 {
				b.Fatalf("gauges = %v, %v", g, err)
			}
		}
	})
	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			st, err := Status(ctx, pool, false)
			if err != nil || len(st) != 2 || st[0].Endpoint != "forgotten" || st[0].Backlog != events {
				b.Fatalf("status = %+v, %v", st, err)
			}
		}
	})
}
