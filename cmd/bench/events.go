package main

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// event is a row of payment_events as the latency phases read it.
type event struct {
	kind     string
	chainID  int64
	contract string
	block    int64
}

// watchEvents reads payment_events in seq order, as a consumer does: on
// every notification on burnpoller_events, the rows past the last one read.
// It hands each row to note with the time the notification arrived, until
// ctx ends; wait returns once it has stopped. It returns once the LISTEN
// is in place.
func watchEvents(ctx context.Context, dbURL string, note func(e event, at time.Time)) (wait func(), err error) {
	l, err := listen(ctx, dbURL, "burnpoller_events")
	if err != nil {
		return nil, err
	}
	reader, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		l.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer l.Close(context.WithoutCancel(ctx))
		defer reader.Close(context.WithoutCancel(ctx))
		var last int64
		for {
			if _, err := l.WaitForNotification(ctx); err != nil {
				return
			}
			at := time.Now()
			rows, err := reader.Query(ctx, `SELECT seq, kind, chain_id, contract, block_number FROM payment_events WHERE seq > $1 ORDER BY seq`, last)
			if err != nil {
				return
			}
			for rows.Next() {
				var (
					seq int64
					e   event
				)
				if rows.Scan(&seq, &e.kind, &e.chainID, &e.contract, &e.block) != nil {
					continue
				}
				last = seq
				note(e, at)
			}
			rows.Close()
		}
	})
	return wg.Wait, nil
}

// percentile is the p-th percentile of sorted, ascending: its element at
// len × p / 100 (0 for none: JSON has no NaN).
func percentile(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
