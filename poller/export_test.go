package poller

import (
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// RetryWait is the first wait after err with a back-off capped at maxWait.
func RetryWait(err error, maxWait time.Duration) time.Duration {
	return retryWait(newBackoff(maxWait), err, maxWait)
}

// ErrHeadSkipped is errHeadSkipped.
var ErrHeadSkipped = errHeadSkipped

// PendingDiff is pendingDiff with its fields exported.
type PendingDiff struct {
	Drop, Put []payments.Payment
	Events    []payments.Event
	Pending   int
}

// DiffPending is diffPending.
func DiffPending(from, to int64, rows []payments.Pending, onChain []payments.Payment, recorded map[payments.Key]string) PendingDiff {
	d := diffPending(from, to, rows, onChain, recorded)
	return PendingDiff{Drop: d.drop, Put: d.put, Events: d.events, Pending: d.pending}
}

// ErrUsed is errUsed.
var ErrUsed = errUsed
