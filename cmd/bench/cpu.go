package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times
// (100 on Linux).
const clockTicks = 100

// cpuSeconds is the CPU time (user and system) process pid has used, -1
// if it cannot be read.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: count after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return (utime + stime) / clockTicks
}

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
		if s := cpuSeconds(int(pid)); s >= 0 {
			total, read = total+s, true
		}
	}
	if !read {
		return -1
	}
	return total
}
