package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/payments"
)

// claimed is a delivery this replica holds the lease of.
type claimed struct {
	seq      int64
	attempts int
	armedAt  time.Time
}

// deliverLoop delivers one endpoint's due deliveries whenever woken; a slow
// endpoint holds up only itself.
func (d *Dispatcher) deliverLoop(ctx context.Context, e Endpoint, wake <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		for ctx.Err() == nil {
			n, err := d.deliverDue(ctx, e)
			if err != nil {
				if ctx.Err() == nil {
					d.log.Warn("webhook delivery round failed; retrying", slog.String("endpoint", e.Label), slog.Any("err", err))
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
}

// deliverDue dead-letters what is past its age, claims up to Batch due
// deliveries, attempts them concurrently and records each outcome. It
// returns how many it attempted.
func (d *Dispatcher) deliverDue(ctx context.Context, e Endpoint) (int, error) {
	rows, err := d.pool.Query(ctx, `
		UPDATE webhook_deliveries SET dead_at = now()
		WHERE endpoint = $1 AND delivered_at IS NULL AND dead_at IS NULL
		  AND next_attempt_at <= now() AND armed_at + $2::interval <= now()
		RETURNING seq`, e.Label, d.cfg.MaxAge)
	if err != nil {
		return 0, fmt.Errorf("dead-lettering: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("dead-lettering: %w", err)
	}
	for _, seq := range dead {
		d.metrics.deliveries.WithLabelValues(e.Label, ResultDead).Inc()
		d.deadLettered(e, seq, "older than WEBHOOK_MAX_AGE")
		d.Signals.Attempted.Send(Attempt{Endpoint: e.Label, Seq: seq, Result: ResultDead})
	}
	rows, err = d.pool.Query(ctx, `
		UPDATE webhook_deliveries w
		SET attempts = w.attempts + 1, last_attempt_at = now(), next_attempt_at = now() + $3::interval
		FROM (SELECT endpoint, seq FROM webhook_deliveries
		      WHERE endpoint = $1 AND delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
		      ORDER BY next_attempt_at, seq LIMIT $2
		      FOR UPDATE SKIP LOCKED) c
		WHERE w.endpoint = c.endpoint AND w.seq = c.seq
		RETURNING w.seq, w.attempts, w.armed_at`, e.Label, d.cfg.Batch, d.cfg.Timeout+d.cfg.Lease)
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		return c, r.Scan(&c.seq, &c.attempts, &c.armedAt)
	})
	if err != nil {
		return 0, fmt.Errorf("claiming deliveries: %w", err)
	}
	if len(claims) == 0 {
		return 0, nil
	}
	// The claims' attempts end within Timeout of the claim, reading their
	// events included, so that each outcome is recorded while the lease
	// (Timeout + Lease) still holds; a claim whose attempt could not
	// start is handed back at once.
	actx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	seqs := make([]int64, len(claims))
	for i, c := range claims {
		seqs[i] = c.seq
	}
	evs, err := d.events(actx, seqs)
	if err != nil {
		d.handBack(ctx, e, claims)
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() { d.attempt(ctx, actx, e, c, evs[c.seq]) })
	}
	wg.Wait()
	return len(claims), nil
}

func (d *Dispatcher) events(ctx context.Context, seqs []int64) (map[int64]payments.Event, error) {
	evs, err := payments.NewStore(d.pool).EventsBySeq(ctx, seqs)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]payments.Event, len(evs))
	for _, e := range evs {
		out[e.Seq] = e
	}
	return out, nil
}

// handBack makes claims due again at once, for another attempt (by this
// replica or another) rather than at the end of their lease.
func (d *Dispatcher) handBack(ctx context.Context, e Endpoint, claims []claimed) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for _, c := range claims {
		_, _ = d.pool.Exec(rctx, `UPDATE webhook_deliveries SET next_attempt_at = now()
			WHERE endpoint = $1 AND seq = $2 AND attempts = $3 AND delivered_at IS NULL`, e.Label, c.seq, c.attempts)
	}
}
