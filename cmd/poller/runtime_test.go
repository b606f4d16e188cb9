package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestRuntimeDefaults: with neither GOMEMLIMIT nor GOGC set, the binary
// sets its memory limit and a GOGC of 300 below it; GOGC set keeps it and
// still gets the limit; GOMEMLIMIT set leaves both to Go.
func TestRuntimeDefaults(t *testing.T) {
	limit, gc := debug.SetMemoryLimit(-1), debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gc)
	})
	for _, tc := range []struct {
		name      string
		env       map[string]string
		wantLimit int64
		wantGC    int
	}{
		{"nothing set", nil, defaultMemoryLimit, defaultGCPercent},
		{"GOGC set", map[string]string{"GOGC": "50"}, defaultMemoryLimit, 100},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, math.MaxInt64, 100},
		{"both set", map[string]string{"GOMEMLIMIT": "1GiB", "GOGC": "50"}, math.MaxInt64, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Go's own reading of the variables happened at start; here
			// the runtime starts from its defaults each time.
			debug.SetMemoryLimit(math.MaxInt64)
			debug.SetGCPercent(100)
			runtimeDefaults(func(k string) string { return tc.env[k] })
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit = %d, want %d", got, tc.wantLimit)
			}
			if got := debug.SetGCPercent(100); got != tc.wantGC {
				t.Errorf("GOGC = %d, want %d", got, tc.wantGC)
			}
		})
	}
}
