package payments

import (
	"context"
	"fmt"
)

// What a listener of NotifyChannel, and whoever watches over listeners,
// needs from the ledger besides the payments themselves.

// NotificationQueueUsage returns the fraction, from 0 to 1, of the server's
// notification queue in use (pg_notification_queue_usage()). The queue is
// shared by every database of the server and is freed only as far as its
// slowest listener has read: a LISTENing session that stops consuming pins
// it, and once it is full every transaction that notifies, the poller's
// included, fails at COMMIT.
func (s *Store) NotificationQueueUsage(ctx context.Context) (float64, error) {
	var usage float64
	if err := s.pool.QueryRow(ctx, `SELECT pg_notification_queue_usage()`).Scan(&usage); err != nil {
		return 0, fmt.Errorf("reading the notification queue usage: %w", interpret(err))
	}
	return usage, nil
}

// LastPaymentID returns the highest payment id committed, or 0 when there
// is none: where a listener that wants only new payments starts.
func (s *Store) LastPaymentID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM payments`).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading the last payment id: %w", interpret(err))
	}
	return id, nil
}
