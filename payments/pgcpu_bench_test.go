package payments_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postgresCPU is the CPU time the local Postgres processes have used (0
// when none is visible: a server elsewhere).
func postgresCPU() time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + k
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// reportPostgresCPU reports the local Postgres' CPU per row since start.
func reportPostgresCPU(b *testing.B, start time.Duration, rows int) {
	b.Helper()
	if used := postgresCPU() - start; used > 0 && rows > 0 {
		b.ReportMetric(float64(used.Microseconds())/float64(rows), "pg-cpu-µs/row")
	}
}
