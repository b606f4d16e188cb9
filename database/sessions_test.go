package database_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/internal/pgtopo"
)

// TestKeepsSessionsBesideOtherTraffic: through PgBouncer in transaction mode
// the probe says no every time, also while other clients' transactions come
// and go through the same pooler (other replicas, probes), which hand
// server connections back in between the probe's steps; straight to the
// server it says yes.
func TestKeepsSessionsBesideOtherTraffic(t *testing.T) {
	srv := pgtopo.Standalone(t)
	bouncer := pgtopo.NewBouncer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	busy, err := pgxpool.New(ctx, bouncer.URL("postgres")+"&default_query_exec_mode=cache_describe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(busy.Close)
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for trafficCtx.Err() == nil {
				_, _ = busy.Exec(trafficCtx, `SELECT 1`)
			}
		})
	}
	defer func() { stopTraffic(); wg.Wait() }()

	for _, tc := range []struct {
		name, url string
		want      bool
	}{
		{"through PgBouncer", bouncer.URL("postgres"), false},
		{"straight to the server", srv.URL("postgres"), true},
	} {
		cc, err := pgx.ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		// DATABASE_EXEC_MODE's default, which works through the pooler.
		cc.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		for i := range 100 {
			got, err := database.KeepsSessions(ctx, cc)
			if err != nil {
				t.Fatalf("%s, probe %d: %v", tc.name, i, err)
			}
			if got != tc.want {
				t.Fatalf("%s, probe %d: KeepsSessions = %v, want %v", tc.name, i, got, tc.want)
			}
		}
	}
}
