package webhooks

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/payments"
)

// attempt POSTs ev to e once, within actx (the claim's Timeout), and
// records the outcome.
func (d *Dispatcher) attempt(ctx, actx context.Context, e Endpoint, c claimed, ev payments.Event) {
	status, problem := d.post(actx, e, ev)
	if ctx.Err() != nil && problem != "" {
		// Shutting down mid-attempt: hand the delivery back at once
		// rather than at the end of the lease (it may have arrived; the
		// next attempt carries the same id).
		d.handBack(ctx, e, []claimed{c})
		return
	}
	// The outcome is recorded even when a stop comes meanwhile: an answer
	// the endpoint gave must not be asked for again. It is recorded only
	// if the delivery is still this attempt's (attempts unchanged): a
	// re-arm by poller webhooks retry, or another replica's attempt after
	// the lease ran out, is newer. Within the lease: an outcome recorded
	// after it may meet another replica's attempt already under way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Lease)
	defer cancel()
	var err error
	result := ResultDelivered
	if problem == "" {
		_, err = d.pool.Exec(ctx, `UPDATE webhook_deliveries
			SET delivered_at = now(), last_status = $3, last_error = NULL
			WHERE endpoint = $1 AND seq = $2 AND attempts = $4 AND delivered_at IS NULL`, e.Label, c.seq, status, c.attempts)
	} else {
		wait := d.cfg.Backoff(c.attempts)
		var dead bool
		err = d.pool.QueryRow(ctx, `UPDATE webhook_deliveries
			SET last_status = nullif($3, 0), last_error = left($4, 500), next_attempt_at = now() + $5::interval,
			    dead_at = CASE WHEN now() + $5::interval > armed_at + $6::interval THEN now() END
			WHERE endpoint = $1 AND seq = $2 AND attempts = $7 AND delivered_at IS NULL AND dead_at IS NULL
			RETURNING dead_at IS NOT NULL`, e.Label, c.seq, status, problem, wait, d.cfg.MaxAge, c.attempts).Scan(&dead)
		if errors.Is(err, pgx.ErrNoRows) {
			// Taken over (the lease ran out), delivered, or re-armed by
			// poller webhooks retry meanwhile: the newer state stands.
			err = nil
		}
		result = ResultFailed
		if dead {
			result = ResultDead
		}
	}
	if err != nil {
		d.log.Warn("recording a webhook attempt failed; the delivery is retried when its lease ends",
			slog.String("endpoint", e.Label), slog.Int64("seq", c.seq), slog.Any("err", err))
		return
	}
	d.metrics.deliveries.WithLabelValues(e.Label, result).Inc()
	switch result {
	case ResultDelivered:
		d.log.Debug("webhook delivered", slog.String("endpoint", e.Label), slog.Int64("seq", c.seq),
			slog.String("event_id", ev.EventID), slog.Int("attempts", c.attempts))
	case ResultFailed:
		d.log.Info("webhook attempt failed; will retry", slog.String("endpoint", e.Label), slog.Int64("seq", c.seq),
			slog.Int("attempts", c.attempts), slog.String("error", problem))
	case ResultDead:
		d.deadLettered(e, c.seq, problem)
	}
	d.Signals.Attempted.Send(Attempt{Endpoint: e.Label, Seq: c.seq, Result: result, Status: status, Err: problem})
}

func (d *Dispatcher) deadLettered(e Endpoint, seq int64, why string) {
	d.log.Error("webhook dead-lettered: retries ran out (WEBHOOK_MAX_AGE); poller webhooks retry --dead sends it again",
		slog.String("endpoint", e.Label), slog.Int64("seq", seq), slog.String("last_error", why))
}
