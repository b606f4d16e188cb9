package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/service"
)

// TestPrepareFailsAtOnceOnEitherSide: the node is asked beside the
// database steps, not after them, and the first failure that waiting cannot
// fix on either side ends the other's wait. A node on another chain is
// refused while the database does not answer (asked one after the other,
// start-up waited for the database until its context ended); a
// PAYMENT_HOOK_SQL that is not a hook is refused while the node has not
// answered and would not for as long as it is asked.
func TestPrepareFailsAtOnceOnEitherSide(t *testing.T) {
	c, _ := node(t)
	wrong := c.Info().ChainID + 1
	for _, tc := range []struct {
		name string
		prep service.Prep
		deps func(t *testing.T) service.Deps
		want error
	}{
		{"wrong chain, database down", service.Prep{ChainID: wrong}, func(t *testing.T) service.Deps {
			t.Helper()
			return downDatabase(t, endpoints(t, c.Info().RPCURL, wrong, 5*time.Second))
		}, chain.ErrWrongChain},
		{"bad hook, node mute", service.Prep{ChainID: 1337, HookSQL: "TRUNCATE payments"}, func(t *testing.T) service.Deps {
			t.Helper()
			eps, _ := muteNode(t)
			pool, _ := pgtest.NewPool(t)
			return service.Deps{Pool: pool, Store: payments.NewStore(pool), Nodes: eps, Log: discard}
		}, payments.ErrBadHook},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := service.Prepare(ctx, tc.prep, tc.deps(t), func() {})
			if !errors.Is(err, service.ErrRefused) || !errors.Is(err, tc.want) {
				t.Fatalf("Prepare = %v, want ErrRefused and %v", err, tc.want)
			}
			if ctx.Err() != nil {
				t.Fatalf("Prepare returned only when its context ended: %v", err)
			}
		})
	}
}

// TestPrepareStoppedReturnsTheStop: a start-up stopped while both sides
// still wait (database down, node mute) returns the stop, not either side's
// last error.
func TestPrepareStoppedReturnsTheStop(t *testing.T) {
	eps, asked := muteNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := service.Prepare(ctx, service.Prep{ChainID: 1337}, downDatabase(t, eps), func() {})
		done <- err
	}()
	select {
	case <-asked:
	case err := <-done:
		t.Fatalf("Prepare returned %v before it was stopped", err)
	case <-time.After(time.Minute):
		t.Fatal("the node was not asked while the database was down")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, service.ErrRefused) {
		t.Fatalf("Prepare = %v, want context.Canceled", err)
	}
}

// TestAMigrationBegunIsNotCutByTheNodesRefusal: the node side's refusal
// ends the database side's waits, but not a migration it has begun (here
// queued behind another migrator's lock when the node reports another
// chain): the migration runs to the end, and then the refusal is returned.
// Cut, it would leave the schema half-migrated until the next migrator.
func TestAMigrationBegunIsNotCutByTheNodesRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrations.LockKey)); err != nil {
		t.Fatal(err)
	}
	// The node answers eth_chainId with chain 5 once told to.
	answer, answered := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-answer:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x5"}`, req.ID)
		close(answered)
	}))
	t.Cleanup(srv.Close)

	done := make(chan error, 1)
	go func() {
		_, err := service.Prepare(ctx, service.Prep{ChainID: 1337, Migrate: true},
			service.Deps{Pool: pool, Store: payments.NewStore(pool), Nodes: endpoints(t, srv.URL, 1337, time.Minute), Log: discard}, func() {})
		done <- err
	}()
	// The migrator is queued behind the lock (it polls for it).
	for {
		var queued bool
		if err := other.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%')`).Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if queued {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Prepare returned %v before migrating", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(answer)
	<-answered
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(migrations.LockKey)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, service.ErrRefused) || !errors.Is(err, chain.ErrWrongChain) {
		t.Fatalf("Prepare = %v, want ErrRefused and ErrWrongChain", err)
	}
	v, err := migrations.Current(ctx, pool)
	// A start-up migration leaves contract steps to poller migrate.
	if err != nil || v != migrations.Compatible() {
		t.Fatalf("schema at %d (%v) after the refusal, want %d: the migration was cut", v, err, migrations.Compatible())
	}
}

// muteNode is a node that reads every request and never answers; asked is
// closed at its first request.
func muteNode(t *testing.T) (*chain.Endpoints, <-chan struct{}) {
	t.Helper()
	asked := make(chan struct{})
	var once sync.Once
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(asked) })
		// Read to the end, so that the server sees the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(mute.Close)
	return endpoints(t, mute.URL, 1337, 10*time.Minute), asked
}

// downDatabase is the deps of a replica on eps whose database never
// answers: nothing listens on port 1, so every ping is refused, which
// start-up retries.
func downDatabase(t *testing.T, eps *chain.Endpoints) service.Deps {
	t.Helper()
	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	return service.Deps{Pool: down, Store: payments.NewStore(down), Nodes: eps, Log: discard}
}
