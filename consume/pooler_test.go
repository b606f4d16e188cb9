package consume_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/db/migrations"
	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtopo"
	"github.com/burnpoller/burnpoller/payments"
)

// TestConsumersThroughATransactionPooler: a service's consumer reaches
// Postgres through PgBouncer in transaction mode, as Debian ships it
// (1.18: no protocol-level prepared statements), with the pool a service
// would make from its connection string. With pgx's default statement
// cache, whose named statements such a pooler cannot hold, both modes fail
// at once with one error that names the fix; with the mode that error
// names, each credits every event exactly once, woken by polling (LISTEN
// cannot work through the pooler, and is not tried there).
func TestConsumersThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	srv := pgtopo.Standalone(t)
	srv.Exec(t, "postgres", "CREATE DATABASE burn")
	bouncer := pgtopo.NewBouncer(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.URL("burn"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = migrations.Migrate(ctx, conn)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := pgxpool.New(ctx, srv.URL("burn"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	ledger(t, direct)
	burns(t, direct, 1, 20, payments.KindConfirmed)

	open := func(url string) *pgxpool.Pool {
		t.Helper()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	var logs testharness.Buffer
	logged := quick(consume.Logger(slog.New(slog.NewTextHandler(&logs, nil))))
	atLeastOnce := func(pool *pgxpool.Pool, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			return consume.RunAtLeastOnce(ctx, pool, name, func(ctx context.Context, e payments.Event) error {
				_, err := pool.Exec(ctx, `INSERT INTO credits (seq, event_id, consumer) VALUES ($1, $2, $3)`, e.Seq, e.EventID, name)
				return err
			}, logged...)
		}
	}
	exactlyOnce := func(pool *pgxpool.Pool, name string) func(context.Context) error {
		return func(ctx context.Context) error { return consume.Run(ctx, pool, name, credit(name), logged...) }
	}

	// The default pool: refused at once, nothing handed over.
	pooled := open(bouncer.URL("burn"))
	for _, name := range []string{"at-least", "exactly"} {
		run := map[string]func(context.Context) error{
			"exactly": exactlyOnce(pooled, "exactly"), "at-least": atLeastOnce(pooled, "at-least"),
		}[name]
		err := start(t, run).wait(t)
		if !errors.Is(err, consume.ErrPooler) || !strings.Contains(err.Error(), "default_query_exec_mode=cache_describe") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s through the pooler with pgx's default statement cache = %v, want one line wrapping ErrPooler that names default_query_exec_mode=cache_describe", name, err)
		}
	}
	if got := int64s(t, direct, `SELECT seq FROM credits`); len(got) != 0 {
		t.Fatalf("credited %v through a refused pool", got)
	}

	// The mode the error names: every event once, in both modes, with
	// events committed while they run.
	fixed := open(bouncer.URL("burn") + "&default_query_exec_mode=cache_describe")
	runs := []*running{start(t, exactlyOnce(fixed, "exactly")), start(t, atLeastOnce(fixed, "at-least"))}
	burns(t, direct, 21, 10, payments.KindConfirmed)
	waitOffset(t, direct, "exactly", 30)
	waitOffset(t, direct, "at-least", 30)
	for _, r := range runs {
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]int64, 30)
	for i := range want {
		want[i] = int64(i + 1)
	}
	for _, name := range []string{"exactly", "at-least"} {
		if got := int64s(t, direct, `SELECT seq FROM credits WHERE consumer = $1 ORDER BY seq`, name); !slices.Equal(got, want) {
			t.Fatalf("%s credited %v, want 1..30 once each", name, got)
		}
	}
	// Neither listened through the pooler, and each said why.
	if n := strings.Count(logs.String(), "goes through a transaction pooler, where LISTEN hears nothing"); n != 2 {
		t.Fatalf("%d warnings that LISTEN is not used through the pooler, want 2:\n%s", n, logs.String())
	}
}
