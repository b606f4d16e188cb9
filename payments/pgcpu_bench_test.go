package payments_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// postgresCPU is the CPU time the local Postgres processes have used (0
// when none is visible: a server elsewhere).
func postgresCPU() time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var seconds float64
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if s := harness.CPUSeconds(pid); s > 0 {
			seconds += s
		}
	}
	return time.Duration(seconds * float64(time.Second))
}

// reportPostgresCPU reports the local Postgres' CPU per row since start.
func reportPostgresCPU(b *testing.B, start time.Duration, rows int) {
	b.Helper()
	if used := postgresCPU() - start; used > 0 && rows > 0 {
		b.ReportMetric(float64(used.Microseconds())/float64(rows), "pg-cpu-µs/row")
	}
}
