// Package testsignal lets a test wait for something a running service did
// ("committed", "latched", "rescanned") instead of guessing with the clock.
// A signal that no test initialised costs one nil check and is never sent.
package testsignal

import "time"

// TB is the part of testing.TB the waits need (the package stays free of
// the testing package, which the binaries link it into).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal carries values of T from a service to a test. The zero Signal is
// off: Send does nothing.
type Signal[T any] struct {
	ch chan T
}

// Init turns the signal on, buffering up to a thousand values so that the
// service never blocks on a slow test. Call it before the service starts.
func (s *Signal[T]) Init() { s.ch = make(chan T, 1000) }

// Send delivers v to a test that initialised the signal; it never blocks,
// dropping v if the buffer is full.
func (s *Signal[T]) Send(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// C is the channel a test reads; nil when the signal is off.
func (s *Signal[T]) C() <-chan T { return s.ch }

// Wait returns the next value, failing t if none arrives within timeout: the
// timeout only keeps a broken test from hanging, it asserts nothing.
func (s *Signal[T]) Wait(t TB, timeout time.Duration) T {
	t.Helper()
	if s.ch == nil {
		t.Fatalf("testsignal: Wait on a signal that was not initialised")
	}
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("testsignal: no signal within %s", timeout)
	}
	var zero T
	return zero
}

// WaitUntil reads values until ok(v) holds and returns that value, failing t
// if none does within timeout.
func (s *Signal[T]) WaitUntil(t TB, timeout time.Duration, ok func(T) bool) T {
	t.Helper()
	if s.ch == nil {
		t.Fatalf("testsignal: WaitUntil on a signal that was not initialised")
	}
	deadline := time.After(timeout)
	for {
		select {
		case v := <-s.ch:
			if ok(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("testsignal: no matching signal within %s", timeout)
			var zero T
			return zero
		}
	}
}
