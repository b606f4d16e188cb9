package consume_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// freezeAfter is a pgx tracer that freezes its client once a statement
// containing match has run: it signals frozen and waits for thaw, as a
// process stopped (SIGSTOP) or cut off right there would.
type freezeAfter struct {
	match  string
	frozen chan struct{}
	thaw   chan struct{}
	once   sync.Once
}

type sqlKey struct{}

func (f *freezeAfter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, d.SQL)
}

func (f *freezeAfter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if sql, _ := ctx.Value(sqlKey{}).(string); d.Err == nil && strings.Contains(sql, f.match) {
		f.once.Do(func() {
			close(f.frozen)
			<-f.thaw
		})
	}
}

// A Reset whose caller froze after its write does not keep the consumer's
// offset row locked for good: the server ends its session once it has sat
// idle in its transaction for the bound, what it wrote is rolled back, and
// the next writer of the row (here another Reset) goes on. Without the
// bound, that writer waits for as long as the frozen connection lives.
// Not parallel: it sets the package's bound.
func TestResetFrozenAfterItsWriteIsEndedByTheServer(t *testing.T) {
	defer consume.SetResetIdleTimeout(time.Second)()
	pool, dbURL := pgtest.NewPool(t)
	burns(t, pool, 1, 3, payments.KindConfirmed)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := consume.Reset(ctx, pool, "svc", 1); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	freeze := &freezeAfter{match: "INSERT INTO consumer_offsets", frozen: make(chan struct{}), thaw: make(chan struct{})}
	cfg.ConnConfig.Tracer = freeze
	frozenPool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer frozenPool.Close()
	frozenErr := make(chan error, 1)
	go func() { frozenErr <- consume.Reset(ctx, frozenPool, "svc", 3) }()
	select {
	case <-freeze.frozen:
	case err := <-frozenErr:
		t.Fatalf("the Reset to freeze returned %v before its write", err)
	}

	// The frozen Reset holds the row: this one waits for it, and goes on
	// only once the server has ended the frozen session.
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := consume.Reset(wctx, pool, "svc", 2); err != nil {
		close(freeze.thaw)
		t.Fatalf("a Reset behind a frozen one = %v, want it to go on once the server ends the frozen session", err)
	}
	close(freeze.thaw)
	if err := <-frozenErr; err == nil {
		t.Fatal("the frozen Reset committed after the server ended its session")
	}
	pos, err := consume.Offset(ctx, pool, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if pos.Seq != 2 {
		t.Fatalf("offset at seq %d, want 2 (the frozen Reset's 3 rolled back)", pos.Seq)
	}
	var leased int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM consumer_offsets WHERE lease_owner IS NOT NULL`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Fatalf("%d leased offset rows, want none", leased)
	}
}
