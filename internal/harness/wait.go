package harness

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// pollEvery is how often WaitFor checks its condition.
const pollEvery = 50 * time.Millisecond

// WaitFor checks cond every 50 ms until it holds, and fails once timeout has
// passed or ctx is done; what names the condition in the error. cond is
// checked at least once.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Wait checks cond every 10 ms until it holds, and fails t once timeout
// has passed; what names the condition. It is the tests' one way to wait
// for something to happen: never a bare sleep as the assertion.
func Wait(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
