package webhooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func() error { return goleak.Find() })
}

const secret = "whsec_test_0123456789"

// token is in every test URL's path: it must never show anywhere.
const token = "path-token-SECRET"

// addEvents records n seen events, as a writer would, and returns them.
func addEvents(t *testing.T, pool *pgxpool.Pool, n int) []payments.Event {
	t.Helper()
	return addEventsOf(t, pool, 1337, n)
}

// addEventsOf commits n seen events of burns on chain chainID.
func addEventsOf(t *testing.T, pool *pgxpool.Pool, chainID uint64, n int) []payments.Event {
	t.Helper()
	ctx := context.Background()
	tx, err := payments.NewStore(pool).Begin(ctx, payments.Limits{LockWait: time.Second, TxTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	evs := make([]payments.Event, n)
	for i := range evs {
		evs[i] = payments.EventFor(payments.KindSeen, payments.Payment{
			ChainID: chainID, Contract: "0x" + strings.Repeat("ab", 20), TxHash: fmt.Sprintf("0x%064x", time.Now().UnixNano()+int64(i)),
			LogIndex: uint32(i), BlockNumber: 9, BlockHash: "0x" + strings.Repeat("cd", 32), Payer: "0x" + strings.Repeat("12", 20),
			Digest: "0x" + strings.Repeat("34", 32), Amount: new(big.Int).Lsh(big.NewInt(1), 255), BurnedAt: time.Unix(1_700_000_000, 0).UTC(),
		}, 0)
	}
	if _, err := tx.AppendEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := payments.NewStore(pool).Events(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	return got[len(got)-n:]
}

// receiver is a real HTTP endpoint whose answer to each request a test
// scripts; it checks every request's signature and body.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	answer func(id string, try int) int // status; 0 hangs until the request ends
	tries  map[string]int
	ok     map[string][]byte // id -> body of the accepted delivery
	bad    []string
	ln     net.Listener
	srv    *http.Server
}

func newReceiver(t *testing.T, answer func(id string, try int) int) *receiver {
	t.Helper()
	r := &receiver{t: t, answer: answer, tries: map[string]int{}, ok: map[string][]byte{}}
	r.srv = &http.Server{Handler: r}
	return r
}

// listen serves on addr ("127.0.0.1:0" for any port).
func (r *receiver) listen(addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.ln = ln
	go func() { _ = r.srv.Serve(ln) }()
	r.t.Cleanup(func() { _ = r.srv.Close() })
	return ln.Addr().String()
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get(webhooks.HeaderEventID)
	r.mu.Lock()
	r.tries[id]++
	try := r.tries[id]
	answer := r.answer
	r.mu.Unlock()
	status := answer(id, try)
	if status == 0 {
		<-req.Context().Done()
		return
	}
	if status >= 200 && status < 300 {
		var e payments.Event
		problem := ""
		switch {
		case req.URL.Path != "/hooks/"+token:
			problem = "path " + req.URL.Path
		case webhooks.Verify(secret, req.Header.Get(webhooks.HeaderSignature), body, time.Now(), time.Minute) != nil:
			problem = "signature of " + id
		case json.Unmarshal(body, &e) != nil || e.EventID != id:
			problem = "body " + string(body)
		}
		r.mu.Lock()
		if problem != "" {
			r.bad = append(r.bad, problem)
		}
		r.ok[id] = body
		r.mu.Unlock()
	}
	if status == http.StatusFound {
		w.Header().Set("Location", "/elsewhere")
	}
	w.WriteHeader(status)
}

func (r *receiver) delivered(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ok[id]
	return ok
}

func (r *receiver) triesOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tries[id]
}

type dispatcher struct {
	d      *webhooks.Dispatcher
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// startDispatcher registers and runs a dispatcher of cfg, after handing it
// to each of prepare.
func startDispatcher(t *testing.T, pool *pgxpool.Pool, cfg webhooks.Config, prepare ...func(*webhooks.Dispatcher)) *dispatcher {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret = secret
	}
	if cfg.Events == nil {
		cfg.Events = payments.Kinds
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 300 * time.Millisecond
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = time.Hour
	}
	cfg.Poll = 20 * time.Millisecond
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 20 * time.Millisecond }
	}
	reg := prometheus.NewRegistry()
	d := webhooks.New(cfg, pool, reg, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	d.Signals.Attempted.Init()
	for _, p := range prepare {
		p(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &dispatcher{d: d, reg: reg, cancel: cancel, done: make(chan struct{})}
	if err := d.Register(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(x.done); _ = d.Run(ctx) }()
	t.Cleanup(x.stop)
	return x
}

func (x *dispatcher) stop() { x.cancel(); <-x.done }

func endpoint(t *testing.T, addr string) webhooks.Endpoint {
	t.Helper()
	eps, err := webhooks.ParseEndpoints("http://" + addr + "/hooks/" + token)
	if err != nil {
		t.Fatal(err)
	}
	return eps[0]
}

// deliveryRows reads the delivery state: seq -> "attempts delivered dead last_status last_error".
func deliveryRows(t *testing.T, pool *pgxpool.Pool) map[int64]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, attempts, delivered_at IS NOT NULL, dead_at IS NOT NULL,
		coalesce(last_status, 0), coalesce(last_error, '') FROM webhook_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var (
			seq             int64
			attempts        int
			delivered, dead bool
			status          int
			lastErr         string
		)
		if err := rows.Scan(&seq, &attempts, &delivered, &dead, &status, &lastErr); err != nil {
			t.Fatal(err)
		}
		out[seq] = fmt.Sprintf("%d %v %v %d %s", attempts, delivered, dead, status, lastErr)
	}
	return out
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testharness.Wait(t, 90*time.Second, what, cond)
}

// TestDeliveryRetriesThroughEveryFailure: the endpoint is down (refused),
// then answers 500, then hangs past the timeout, then redirects, and then
// accepts: every event arrives, signed, with the same id on every try, and
// the failures are recorded without the URL.
func TestDeliveryRetriesThroughEveryFailure(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	// A port with nothing on it: refused until the receiver comes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newReceiver(t, func(_ string, try int) int {
		switch try {
		case 1:
			return http.StatusInternalServerError
		case 2:
			return 0 // hang
		case 3:
			return http.StatusFound
		}
		return http.StatusNoContent
	})
	ep := endpoint(t, addr)
	x := startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	evs := addEvents(t, pool, 3)
	refused := x.d.Signals.Attempted.WaitUntil(t, 30*time.Second, func(a webhooks.Attempt) bool { return a.Result == webhooks.ResultFailed })
	if refused.Status != 0 || !strings.Contains(refused.Err, "connection refused") {
		t.Fatalf("attempt with nothing listening: %+v", refused)
	}
	r.listen(addr)
	for _, e := range evs {
		waitUntil(t, "event "+e.EventID+" delivered", func() bool { return r.delivered(e.EventID) })
	}
	waitUntil(t, "deliveries recorded", func() bool {
		for _, row := range deliveryRows(t, pool) {
			if !strings.Contains(row, " true false 204 ") {
				return false
			}
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bad {
		t.Error("receiver:", b)
	}
	for _, e := range evs {
		if r.tries[e.EventID] != 4 {
			t.Errorf("event %d tried %d times at the receiver, want 4 (500, hang, 302, 204)", e.Seq, r.tries[e.EventID])
		}
		want, _ := json.Marshal(e)
		if string(r.ok[e.EventID]) != string(want) {
			t.Errorf("event %d body\n%s\nwant\n%s", e.Seq, r.ok[e.EventID], want)
		}
	}
	metrics, err := testutil.CollectAndFormat(x.reg, expfmt.TypeTextPlain, "burnpoller_webhook_deliveries_total")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`burnpoller_webhook_deliveries_total{endpoint=%q,result="delivered"} 3`, ep.Label)
	if strings.Contains(string(metrics), token) || !strings.Contains(string(metrics), want) {
		t.Fatalf("metrics, want %s and no URL:\n%s", want, metrics)
	}
	if strings.Contains(refused.Err, token) {
		t.Fatalf("the recorded error names the URL: %s", refused.Err)
	}
}

// TestStatusOfAGroupCountsItsEvents: webhooks status --group counts, of
// each endpoint's backlog, only the events of the group's chain and
// contracts.
func TestStatusOfAGroupCountsItsEvents(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	r := newReceiver(t, func(string, int) int { return http.StatusServiceUnavailable })
	ep := endpoint(t, r.listen("127.0.0.1:0"))
	x := startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}, Events: []string{payments.KindSeen}})
	defer x.stop()
	addEventsOf(t, pool, 1337, 2)
	addEventsOf(t, pool, 1338, 3)
	contract := "0x" + strings.Repeat("ab", 20)
	for _, tt := range []struct {
		of   *webhooks.Burns
		want int64
	}{
		{nil, 5},
		{&webhooks.Burns{ChainID: 1337, Contracts: []string{contract}}, 2},
		{&webhooks.Burns{ChainID: 1338, Contracts: []string{contract}}, 3},
		{&webhooks.Burns{ChainID: 1338, Contracts: []string{"0x" + strings.Repeat("ef", 20)}}, 0},
	} {
		st, err := webhooks.StatusOf(context.Background(), pool, true, tt.of)
		if err != nil || len(st) != 1 || st[0].Backlog != tt.want || st[0].Delivered != 0 {
			t.Fatalf("status of %+v: %+v, %v; want a backlog of %d", tt.of, st, err, tt.want)
		}
	}
}

// TestDeadLettersAndRetry: an endpoint that always fails is dead-lettered
// once its deliveries are older than the max age; retry --dead re-arms
// them, and retry --seq sends a delivered event again with the same id.
func TestDeadLettersAndRetry(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	var mu sync.Mutex
	up := false
	r := newReceiver(t, func(string, int) int {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	ep := endpoint(t, r.listen("127.0.0.1:0"))
	x := startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}, MaxAge: 300 * time.Millisecond})
	evs := addEvents(t, pool, 2)
	for range evs {
		x.d.Signals.Attempted.WaitUntil(t, 30*time.Second, func(a webhooks.Attempt) bool { return a.Result == webhooks.ResultDead })
	}
	rows := deliveryRows(t, pool)
	for _, e := range evs {
		if !strings.HasSuffix(rows[e.Seq], " false true 503 POST "+ep.Label+": HTTP 503") {
			t.Fatalf("delivery of %d: %q, want dead-lettered after HTTP 503", e.Seq, rows[e.Seq])
		}
	}
	st, err := webhooks.Status(context.Background(), pool, true)
	if err != nil || len(st) != 1 || st[0].DeadLetters != 2 || st[0].Backlog != 0 || st[0].Delivered != 0 {
		t.Fatalf("status %+v, %v", st, err)
	}
	waitUntil(t, "the dead-letter gauge", func() bool {
		m, _ := testutil.CollectAndFormat(x.reg, expfmt.TypeTextPlain, "burnpoller_webhook_dead_letters")
		return strings.Contains(string(m), fmt.Sprintf(`burnpoller_webhook_dead_letters{endpoint=%q} 2`, ep.Label))
	})
	// The retries run with a long max age: on a loaded machine the
	// re-armed deliveries must not age out again before their attempt.
	x.stop()
	startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	mu.Lock()
	up = true
	mu.Unlock()
	if n, err := webhooks.RetryDead(context.Background(), pool); err != nil || n != 2 {
		t.Fatalf("RetryDead = %d, %v", n, err)
	}
	for _, e := range evs {
		waitUntil(t, "the re-armed delivery", func() bool { return r.delivered(e.EventID) })
	}
	waitUntil(t, "the deliveries recorded", func() bool {
		st, err := webhooks.Status(context.Background(), pool, true)
		return err == nil && st[0].Delivered == 2
	})
	before := r.triesOf(evs[0].EventID)
	if n, err := webhooks.RetrySeq(context.Background(), pool, evs[0].Seq); err != nil || n != 1 {
		t.Fatalf("RetrySeq = %d, %v", n, err)
	}
	waitUntil(t, "the event sent again", func() bool { return r.triesOf(evs[0].EventID) == before+1 })
	if _, err := webhooks.RetrySeq(context.Background(), pool, 999_999); err == nil {
		t.Fatal("RetrySeq of a missing event succeeded")
	}
	waitUntil(t, "all delivered", func() bool {
		st, err := webhooks.Status(context.Background(), pool, true)
		return err == nil && st[0].Delivered == 2 && st[0].DeadLetters == 0 && st[0].Backlog == 0
	})
}

// TestReplicasShareDeliveriesAndSurviveAStop: two dispatchers deliver one
// endpoint's events; one is stopped while a delivery it claimed hangs at
// the receiver. Every event is delivered, each claimed by one replica at a
// time, and the stopped one's is taken over.
func TestReplicasShareDeliveriesAndSurviveAStop(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	hung := make(chan string, 1)
	var once sync.Once
	r := newReceiver(t, func(id string, _ int) int {
		first := false
		once.Do(func() { first = true })
		if first {
			hung <- id
			return 0 // until the sender gives up
		}
		return http.StatusOK
	})
	ep := endpoint(t, r.listen("127.0.0.1:0"))
	// The stopped replica hands its delivery back; should that fail on a
	// loaded machine, its lease (20 s + 3 s) runs out and another takes it.
	cfg := webhooks.Config{Endpoints: []webhooks.Endpoint{ep}, Timeout: 20 * time.Second, Lease: 3 * time.Second}
	a := startDispatcher(t, pool, cfg)
	b := startDispatcher(t, pool, cfg)
	evs := addEvents(t, pool, 40)
	stuck := <-hung
	// Whichever replica holds the hung delivery is stopped mid-attempt:
	// it hands the delivery back, and the other delivers it.
	a.stop()
	b.stop()
	c := startDispatcher(t, pool, cfg)
	for _, e := range evs {
		waitUntil(t, "event delivered", func() bool { return r.delivered(e.EventID) })
	}
	if !r.delivered(stuck) {
		t.Fatal("the hung delivery was not taken over")
	}
	waitUntil(t, "every delivery recorded", func() bool {
		st, err := webhooks.Status(context.Background(), pool, true)
		return err == nil && st[0].Delivered == int64(len(evs))
	})
	c.stop()
	for seq, row := range deliveryRows(t, pool) {
		if !strings.Contains(row, " true false 200 ") {
			t.Errorf("delivery %d: %s", seq, row)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// roundTripper is an http.RoundTripper of a function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAFrozenReplicaDelaysOnlyWhatItClaimed: replica A claims a delivery
// and freezes inside the attempt (its process stopped: nothing it does
// returns, not even its own timeout). Replica B, running beside it, sends
// the event once A's claim has run out: WEBHOOK_TIMEOUT plus the lease of
// a few seconds after A's claim, not the 30 s beyond it of before, which
// held another group's deliveries for about 40 s at the defaults.
func TestAFrozenReplicaDelaysOnlyWhatItClaimed(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	r := newReceiver(t, func(string, int) int { return http.StatusNoContent })
	ep := endpoint(t, r.listen("127.0.0.1:0"))
	cfg := webhooks.Config{Endpoints: []webhooks.Endpoint{ep}, Timeout: time.Second}
	thaw := make(chan struct{})
	frozen := make(chan struct{}, 1)
	a := startDispatcher(t, pool, cfg)
	a.d.SetTransport(roundTripper(func(*http.Request) (*http.Response, error) {
		frozen <- struct{}{}
		<-thaw
		return nil, errors.New("thawed")
	}))
	t.Cleanup(func() { close(thaw) }) // after B stops, before A does
	ev := addEvents(t, pool, 1)[0]
	select {
	case <-frozen:
	case <-time.After(30 * time.Second):
		t.Fatal("replica A never claimed the delivery")
	}
	var lease time.Duration
	if err := pool.QueryRow(context.Background(), `SELECT extract(epoch FROM next_attempt_at - last_attempt_at) * 1e9
		FROM webhook_deliveries WHERE seq = $1`, ev.Seq).Scan(&lease); err != nil {
		t.Fatal(err)
	}
	if want := cfg.Timeout + webhooks.DefaultLease; lease != want {
		t.Fatalf("A's claim lasts %s, want WEBHOOK_TIMEOUT + %s = %s", lease, webhooks.DefaultLease, want)
	}
	b := startDispatcher(t, pool, cfg)
	got := b.d.Signals.Attempted.WaitUntil(t, 3*(cfg.Timeout+webhooks.DefaultLease), func(at webhooks.Attempt) bool { return at.Seq == ev.Seq })
	if got.Result != webhooks.ResultDelivered || !r.delivered(ev.EventID) {
		t.Fatalf("replica B's attempt %+v, want the event delivered", got)
	}
	if rows := deliveryRows(t, pool); rows[ev.Seq] != "2 true false 204 " {
		t.Fatalf("delivery row %q, want delivered at the second attempt", rows[ev.Seq])
	}
}
