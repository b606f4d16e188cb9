package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/probe"
	"github.com/burnpoller/burnpoller/service"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func() error {
		// The dev chain's go-ethereum keeps a process-wide sender cache, and
		// leveldb drains its pool for a moment after Close.
		return goleak.Find(
			goleak.IgnoreTopFunction("github.com/ethereum/go-ethereum/core.(*txSenderCacher).cache"),
			goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"))
	})
}

// node starts a real dev chain sealing blocks, and endpoints on it.
func node(t *testing.T) (*devchain.Chain, *chain.Endpoints) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", BlockTime: 20 * time.Millisecond, Payers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, endpoints(t, c.Info().RPCURL, c.Info().ChainID, 5*time.Second)
}

// endpoints are the endpoints of one node at url, expecting chainID, each
// call bounded by timeout.
func endpoints(t *testing.T, url string, chainID uint64, timeout time.Duration) *chain.Endpoints {
	t.Helper()
	cl, err := chain.Dial(context.Background(), url, chain.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{ChainID: chainID, Finality: chain.FinalityFinalized, MaxRange: 100}, nil, discard)
	t.Cleanup(eps.Close)
	return eps
}

var discard = slog.New(slog.DiscardHandler)

// newService builds a replica of group "g" on a fresh database.
func newService(t *testing.T, eps *chain.Endpoints, contract common.Address, hookSQL string) (*service.Service, *payments.Store) {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	store := payments.NewStore(pool)
	reg := prometheus.NewRegistry()
	svc, err := service.New(service.Config{
		Groups: []service.Group{{
			Prep:       service.Prep{ChainID: 1337, Contracts: []common.Address{contract}, HookSQL: hookSQL},
			Writer:     poller.WriterConfig{ChainID: 1337, Contracts: []common.Address{contract}, MaxBlockRange: 100, LockWait: 200 * time.Millisecond, TxTimeout: 5 * time.Second},
			Loop:       poller.LoopConfig{CursorID: "g", PollInterval: 50 * time.Millisecond},
			Nodes:      eps,
			Metrics:    poller.NewMetrics(reg, "t", "t", "t"),
			Registerer: reg,
		}},
		HTTPAddr:        "127.0.0.1:0",
		ShutdownTimeout: 5 * time.Second,
	}, service.Deps{Pool: pool, Store: store, Log: discard}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	return svc, store
}

func readyz(t *testing.T, addr string) probe.Status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st probe.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("/readyz body %q: %v", b, err)
	}
	return st
}

// TestServiceStartsServesAndStops: Start serves the probes at once, the
// replica becomes ready and records, Stop ends the work and the server, and
// Stop is safe twice.
func TestServiceStartsServesAndStops(t *testing.T) {
	c, eps := node(t)
	svc, store := newService(t, eps, c.Info().BurnContract, "")
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	addr := svc.Addr()
	testharness.Wait(t, time.Minute, "ready", func() bool { return readyz(t, addr).Status == "ready" })
	testharness.Wait(t, time.Minute, "the cursor at the first finalized block", func() bool {
		cur, err := store.Cursor(context.Background(), "g")
		return err == nil && cur.Block >= 32 && cur.Hash != ""
	})
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := svc.Stop(); err != nil {
		t.Fatalf("second Stop = %v", err)
	}
	select {
	case <-svc.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := svc.Err(); err != nil {
		t.Fatalf("Err after Stop = %v", err)
	}
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Fatal("the HTTP server still answers after Stop")
	}
}

// TestServiceRefusesAHookTheGroupDoesNotRun: start-up ends by itself with an
// error wrapping ErrRefused (exit 2 in the binary), having served /readyz
// meanwhile.
func TestServiceRefusesAHookTheGroupDoesNotRun(t *testing.T) {
	c, eps := node(t)
	svc, store := newService(t, eps, c.Info().BurnContract, "SELECT $1::bigint")
	if err := store.AgreeOnHook(context.Background(), 1337, strings.ToLower(c.Info().BurnContract.Hex()), "", false); err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-svc.Done():
	case <-time.After(time.Minute):
		t.Fatal("start-up did not end")
	}
	if err := svc.Err(); !errors.Is(err, service.ErrRefused) || !errors.Is(err, payments.ErrHookMismatch) {
		t.Fatalf("Err = %v, want ErrRefused and ErrHookMismatch", err)
	}
	if st := readyz(t, svc.Addr()); st.Checks["poller"] != "starting" {
		t.Fatalf("/readyz during a refused start-up = %+v", st)
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Cursor(context.Background(), "g"); !errors.Is(err, payments.ErrCursorNotFound) {
		t.Fatalf("a refused replica seeded its cursor: %v", err)
	}
}

// TestStopWithoutStart is safe.
func TestStopWithoutStart(t *testing.T) {
	_, eps := node(t)
	svc, _ := newService(t, eps, common.Address{1}, "")
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
}
