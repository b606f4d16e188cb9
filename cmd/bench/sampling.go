package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// Process sampling, read from /proc on this machine: where the CPU went,
// resident memory, and how busy the machine was.

// backendsCPU is the CPU time the Postgres backends serving conn's
// database have used (conn's own excepted), as read from /proc on this
// machine; -1 if none can be read.
func backendsCPU(ctx context.Context, conn *pgx.Conn) float64 {
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return -1
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return -1
	}
	total, read := 0.0, false
	for _, pid := range pids {
		if s := harness.CPUSeconds(int(pid)); s >= 0 {
			total, read = total+s, true
		}
	}
	if !read {
		return -1
	}
	return total
}

// nodeCPU is the CPU time the real node of a run has used so far; -1 on
// sim (the node is this process) or if it cannot be read.
func (b *bench) nodeCPU() float64 {
	if b.node == nil {
		return -1
	}
	return harness.CPUSeconds(b.node.proc.Pid())
}

// serverCPU is the CPU time of a run's servers: the database's backends
// (over their lives, which are the run's) and, on a real node, the node's
// since nodeAtStart (nodeCPU as the run began).
func (b *bench) serverCPU(ctx context.Context, conn *pgx.Conn, nodeAtStart float64) map[string]float64 {
	m := map[string]float64{"postgres_backends": backendsCPU(ctx, conn)}
	if b.node != nil && nodeAtStart >= 0 {
		m["node"] = b.nodeCPU() - nodeAtStart
	}
	return m
}

// peakRSSMiB is p's peak resident memory in MiB, -1 if it cannot be read.
func peakRSSMiB(p *harness.Proc) int64 {
	n, err := p.PeakRSS()
	if err != nil {
		return -1
	}
	return n >> 20
}

// rssMiB is process pid's resident memory now, in MiB; 0 if it cannot be
// read.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// loadAverage is /proc/loadavg's first three fields: how busy the machine
// was as a run began (other work shares its two cores).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
