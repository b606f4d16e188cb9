package poller

import "time"

// RetryWait is the first wait after err with a back-off capped at maxWait.
func RetryWait(err error, maxWait time.Duration) time.Duration {
	return retryWait(newBackoff(maxWait), err, maxWait)
}

// ErrHeadSkipped is errHeadSkipped.
var ErrHeadSkipped = errHeadSkipped
