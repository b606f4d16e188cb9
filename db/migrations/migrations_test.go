package migrations_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestConcurrentMigratorsAgree(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if err := check(ctx, t, dbURL); !errors.Is(err, migrations.ErrPending) {
		t.Fatalf("Check on an empty database = %v, want ErrPending", err)
	}
	// Replicas starting at once all migrate; the advisory lock serialises them.
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close(ctx)
			_, errs[i] = migrations.Migrate(ctx, conn)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	if err := check(ctx, t, dbURL); err != nil {
		t.Fatalf("Check after migrating = %v", err)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('payments', 'block_cursors')`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 2 {
		t.Fatalf("%d ledger tables, want 2", tables)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE "+migrations.VersionTable+" SET version = $1", migrations.Latest()+1); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Check(ctx, conn); !errors.Is(err, migrations.ErrTooNew) {
		t.Fatalf("Check = %v, want ErrTooNew", err)
	}
	if _, err := migrations.Migrate(ctx, conn); !errors.Is(err, migrations.ErrTooNew) {
		t.Fatalf("Migrate = %v, want ErrTooNew", err)
	}
}

func check(ctx context.Context, t *testing.T, dbURL string) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	return migrations.Check(ctx, conn)
}
