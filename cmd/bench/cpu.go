package main

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

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
