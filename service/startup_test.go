package service_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/service"
)

// TestPrepareRefusesAWrongChainWhileTheDatabaseIsDown: the node is asked
// beside the database steps, not after them, so a node on another chain is
// refused at once even while the database does not answer (asked one after
// the other, start-up would wait for the database until the context ends).
func TestPrepareRefusesAWrongChainWhileTheDatabaseIsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", BlockTime: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl, err := chain.Dial(ctx, c.Info().RPCURL, chain.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wrong := c.Info().ChainID + 1
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{ChainID: wrong, Finality: chain.FinalityFinalized, MaxRange: 100}, nil, discard)
	t.Cleanup(eps.Close)
	// Nothing listens on port 1: every ping is refused, which start-up
	// retries.
	down, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)

	_, err = service.Prepare(ctx, service.Prep{ChainID: wrong, Contracts: []common.Address{c.Info().BurnContract}},
		service.Deps{Pool: down, Store: payments.NewStore(down), Nodes: eps, Log: discard}, func() {})
	if !errors.Is(err, service.ErrRefused) || !errors.Is(err, chain.ErrWrongChain) {
		t.Fatalf("Prepare = %v, want ErrRefused and ErrWrongChain (the database never answered)", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Prepare returned only when its context ended: %v", err)
	}
}

// TestPrepareEndsTheNodeWaitOnAPermanentDatabaseFailure: a failure of the
// database side that waiting cannot fix (here a PAYMENT_HOOK_SQL that is
// not a hook) ends the node side too, even while the node has not answered
// and would not for as long as it is asked: Prepare returns the hook's
// refusal, not the node's wait.
func TestPrepareEndsTheNodeWaitOnAPermanentDatabaseFailure(t *testing.T) {
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read to the end, so that the server sees the client hang up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(mute.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := chain.Dial(ctx, mute.URL, chain.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{ChainID: 1337, Finality: chain.FinalityFinalized, MaxRange: 100}, nil, discard)
	t.Cleanup(eps.Close)
	pool, _ := pgtest.NewPool(t)

	_, err = service.Prepare(ctx, service.Prep{ChainID: 1337, HookSQL: "TRUNCATE payments"},
		service.Deps{Pool: pool, Store: payments.NewStore(pool), Nodes: eps, Log: discard}, func() {})
	if !errors.Is(err, service.ErrRefused) || !errors.Is(err, payments.ErrBadHook) {
		t.Fatalf("Prepare = %v, want ErrRefused and ErrBadHook", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Prepare returned only when its context ended: %v", err)
	}
}

// TestPrepareStoppedReturnsTheStop: a start-up stopped while both sides
// still wait (database down, node mute) returns the stop, not either side's
// last error.
func TestPrepareStoppedReturnsTheStop(t *testing.T) {
	asked := make(chan struct{})
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-asked:
		default:
			close(asked)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(mute.Close)
	cl, err := chain.Dial(context.Background(), mute.URL, chain.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{ChainID: 1337, Finality: chain.FinalityFinalized, MaxRange: 100}, nil, discard)
	t.Cleanup(eps.Close)
	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := service.Prepare(ctx, service.Prep{ChainID: 1337},
			service.Deps{Pool: down, Store: payments.NewStore(down), Nodes: eps, Log: discard}, func() {})
		done <- err
	}()
	<-asked
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || errors.Is(err, service.ErrRefused) {
		t.Fatalf("Prepare = %v, want context.Canceled", err)
	}
}
