package consume_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// TestRunFilters: the handler is handed exactly the selected events, in seq
// order, once each, and the offset ends at the last event whatever the
// filter dropped (windows of 3 seqs, so that filtered stretches span them).
func TestRunFilters(t *testing.T) {
	t.Parallel()
	// seq:              1 seen A/1, 2 confirmed A/1, 3 seen B/1, 4 confirmed B/1, 5 retracted A/1,
	//                   6 confirmed A/5, 7 seen A/5, 8 confirmed B/5, 9 seen A/1, 10 seen B/1
	specs := []spec{
		{kind: payments.KindSeen}, {kind: payments.KindConfirmed},
		{kind: payments.KindSeen, contract: contractB}, {kind: payments.KindConfirmed, contract: contractB},
		{kind: payments.KindRetracted},
		{kind: payments.KindConfirmed, chain: 5}, {kind: payments.KindSeen, chain: 5},
		{kind: payments.KindConfirmed, chain: 5, contract: contractB},
		{kind: payments.KindSeen}, {kind: payments.KindSeen, contract: contractB},
	}
	tests := []struct {
		name string
		give []consume.Option
		want []int64
	}{
		{name: "no filter", want: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{name: "confirmed", give: []consume.Option{consume.Kinds(payments.KindConfirmed)}, want: []int64{2, 4, 6, 8}},
		{name: "seen and retracted", give: []consume.Option{consume.Kinds(payments.KindSeen, payments.KindRetracted)}, want: []int64{1, 3, 5, 7, 9, 10}},
		{name: "chain 5", give: []consume.Option{consume.Chains(5)}, want: []int64{6, 7, 8}},
		{name: "contract B in upper case", give: []consume.Option{consume.Contracts("0x" + strings.ToUpper(contractB[2:]))}, want: []int64{3, 4, 8, 10}},
		{name: "confirmed of B on chain 1", give: []consume.Option{consume.Kinds(payments.KindConfirmed), consume.Contracts(contractB), consume.Chains(1)}, want: []int64{4}},
		{name: "no kind", give: []consume.Option{consume.Kinds()}, want: []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			ledger(t, pool)
			var evs []payments.Event
			for i, s := range specs {
				evs = append(evs, record(t, pool, makeEvent(i+1, s))...)
			}
			opts := quick(append([]consume.Option{consume.BatchSize(3)}, tt.give...)...)
			r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("svc"), opts...) })
			waitOffset(t, pool, "svc", 10)
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if got := credited(t, pool); !slices.Equal(got, tt.want) {
				t.Fatalf("credited seqs %v, want %v", got, tt.want)
			}
			if got, want := offset(t, pool, "svc"), consume.PositionOf(evs[9]); got != want {
				t.Fatalf("offset %+v, want %+v", got, want)
			}
		})
	}
}

// TestRunHandlerFailsMidBatch: a handler that fails at the third event of a
// batch, after writing, leaves nothing of the batch committed; the events
// before it are handed over again and commit, then the failing one, once.
func TestRunHandlerFailsMidBatch(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 5, payments.KindConfirmed)

	var (
		mu    sync.Mutex
		calls []int64
		fail  = true
	)
	h := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if err := credit("svc")(ctx, tx, e); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, e.Seq)
		if e.Seq == 3 && fail {
			fail = false
			return errors.New("ledger service says no")
		}
		return nil
	}
	reg := prometheus.NewRegistry()
	r := start(t, func(ctx context.Context) error {
		return consume.Run(ctx, pool, "svc", h, quick(consume.Metrics(reg))...)
	})
	waitOffset(t, pool, "svc", 5)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// 1-3 failed together; 1-2 committed alone; then 3-5.
	if want := []int64{1, 2, 3, 1, 2, 3, 4, 5}; !slices.Equal(calls, want) {
		t.Fatalf("handler calls %v, want %v", calls, want)
	}
	if got, want := credited(t, pool), []int64{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("credited %v, want %v", got, want)
	}
	if got, want := balances(t, pool), wantBalances(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
	if got := metric(t, reg, "burnpoller_consumer_failures_total"); got != 1 {
		t.Fatalf("failures_total %v, want 1", got)
	}
}

// TestRunConnectionTerminatedBeforeCommit: the server ends the batch's
// session after the handlers wrote and the offset moved, before COMMIT;
// nothing of it stays, and every event is credited exactly once in the
// end.
func TestRunConnectionTerminatedBeforeCommit(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 6, payments.KindConfirmed)

	var killed atomic.Int32
	kill := consume.BeforeCommit(func(tx pgx.Tx) {
		if killed.Add(1) > 2 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ok bool
		// Waits until the backend is gone.
		if err := pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, tx.Conn().PgConn().PID()).Scan(&ok); err != nil || !ok {
			t.Errorf("terminating the batch's backend: %v, %v", ok, err)
		}
	})
	r := start(t, func(ctx context.Context) error {
		return consume.Run(ctx, pool, "svc", credit("svc"), quick(consume.BatchSize(4), kill)...)
	})
	waitOffset(t, pool, "svc", 6)
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if n := killed.Load(); n < 3 {
		t.Fatalf("%d batches reached COMMIT, want the 2 killed and more", n)
	}
	if got, want := credited(t, pool), seqs(evs); !slices.Equal(got, want) {
		t.Fatalf("credited %v, want %v", got, want)
	}
	if got, want := balances(t, pool), wantBalances(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
}

// TestRunSharedNameWithConcurrentWriters: writers commit events side by
// side through the poller's write path (the payments package: events
// staged, numbered inside COMMIT) — four groups at once, on different
// contracts and chains, each with two replicas taking turns on its cursor —
// while two consumers of one name credit them. Both consumers take part,
// and every event is credited exactly once, in seq order, without a gap.
func TestRunSharedNameWithConcurrentWriters(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	store := payments.NewStore(pool)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Two consumers of the name. Each, once it has committed a batch, waits
	// until the other has committed one too, so both take part whichever
	// comes first. It waits in OnProgress, called after COMMIT, holding
	// nothing: the other finds the name free at its next read. A batch
	// takes at most 7 of the 120 events, so the second finds some left.
	took := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	for i, label := range []string{"a", "b"} {
		r := start(t, func(ctx context.Context) error {
			return consume.Run(ctx, pool, "svc", credit(label), quick(consume.BatchSize(7), consume.OnProgress(func(p consume.Progress) {
				if p.Handled == 0 {
					return
				}
				once[i].Do(func() { close(took[i]) })
				select {
				case <-took[1-i]:
				case <-ctx.Done():
				}
			}))...)
		})
		t.Cleanup(func() {
			if err := r.stop(t); err != nil {
				t.Errorf("consumer %s: Run = %v", label, err)
			}
		})
	}

	// Three contracts on chain 1 and contract A on chain 5: four groups.
	groups := []group{
		{cursor: "a", chain: 1, contracts: []string{contractA}},
		{cursor: "b", chain: 1, contracts: []string{contractB}},
		{cursor: "c", chain: 1, contracts: []string{contractC}},
		{cursor: "a on 5", chain: 5, contracts: []string{contractA}},
	}
	const replicas, blocks = 2, 15
	// atBlock is what group k records with block b, in one transaction, as
	// the poller would: the burn head tracking saw at b settled, confirmed
	// (its payment inserted) or, every fourth block, retracted (the chain no
	// longer holds it; block 1's was never seen); then the burn of block
	// b+1, seen.
	atBlock := func(k int, b int64) []payments.Event {
		burn := func(b int64, kind string) payments.Event {
			g := groups[k]
			return makeEvent(k*1000+int(b), spec{kind: kind, chain: g.chain, contract: g.contracts[0], block: b})
		}
		settle := burn(b, payments.KindConfirmed)
		if b%4 == 0 {
			settle = burn(b, payments.KindRetracted)
		}
		return []payments.Event{settle, burn(b+1, payments.KindSeen)}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		written []payments.Event
		txs     = make([][replicas]int, len(groups)) // transactions each replica committed
	)
	for _, g := range groups {
		if _, err := store.SeedCursor(ctx, g.cursor, 0, blockHash(0)); err != nil {
			t.Fatal(err)
		}
	}
	for k, g := range groups {
		for r := range replicas {
			wg.Go(func() {
				for {
					var evs []payments.Event
					ok, err := writeTx(ctx, store, g, func(cur payments.Cursor) ([]payments.Event, int64) {
						if cur.Block >= blocks {
							return nil, cur.Block
						}
						evs = atBlock(k, cur.Block+1)
						return evs, cur.Block + 1
					})
					if err != nil {
						t.Errorf("group %s, replica %d: %v", g.cursor, r, err)
						return
					}
					if !ok {
						return
					}
					mu.Lock()
					written = append(written, evs...)
					txs[k][r]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Two events a block.
	total := len(groups) * blocks * 2
	if len(written) != total {
		t.Fatalf("writers committed %d events, want %d", len(written), total)
	}
	waitOffset(t, pool, "svc", int64(total))
	t.Logf("transactions per replica of each group: %v", txs)

	// Every seq once, in seq order (the credits' commit order), no gap.
	want := make([]int64, total)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if got := credited(t, pool); !slices.Equal(got, want) {
		t.Fatalf("credited (in commit order) %v, want 1..%d once each", got, total)
	}
	// Each credit is of the event at its seq, and the events are those
	// the writers committed.
	ids := texts(t, pool, `SELECT event_id FROM payment_events ORDER BY seq`)
	if got := texts(t, pool, `SELECT event_id FROM credits ORDER BY n`); !slices.Equal(got, ids) {
		t.Fatalf("credited events %v, want payment_events in seq order %v", got, ids)
	}
	wantIDs := make([]string, 0, total)
	for _, e := range written {
		wantIDs = append(wantIDs, e.EventID)
	}
	if got := slices.Sorted(slices.Values(ids)); !slices.Equal(got, slices.Sorted(slices.Values(wantIDs))) {
		t.Fatalf("payment_events holds %v, want the events written %v", got, wantIDs)
	}
	// A group's transactions take its cursor in turns: its events are
	// numbered in the order of its blocks.
	for k, g := range groups {
		var want []string
		for b := int64(1); b <= blocks; b++ {
			for _, e := range atBlock(k, b) {
				want = append(want, e.EventID)
			}
		}
		got := texts(t, pool, fmt.Sprintf(`SELECT event_id FROM payment_events WHERE chain_id = %d AND contract = '%s' ORDER BY seq`,
			g.chain, g.contracts[0]))
		if !slices.Equal(got, want) {
			t.Fatalf("group %s's events in seq order %v, want %v", g.cursor, got, want)
		}
	}
	last, err := consume.PositionAt(context.Background(), pool, int64(total))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := offset(t, pool, "svc"), last; got != want || got.EventID != ids[total-1] || got.History == "" {
		t.Fatalf("offset %+v, want %+v", got, want)
	}
	if got, want := balances(t, pool), wantBalances(written); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
	by := texts(t, pool, `SELECT consumer || ' ' || count(*) || ' events in ' || count(DISTINCT txid) || ' batches' FROM credits GROUP BY consumer ORDER BY consumer`)
	if len(by) != 2 {
		t.Fatalf("credited by %v, want both consumers", by)
	}
	t.Logf("credited by %v", by)
}

// TestRunStandbyTakesOver: while one consumer of a name holds its row, the
// other stands by (and says so); when the first stops, the second goes on
// from the first's offset.
func TestRunStandbyTakesOver(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 4, payments.KindConfirmed)

	inside := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if e.Seq == 3 {
			once.Do(func() { close(inside) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return credit("a")(ctx, tx, e)
	}
	a := start(t, func(ctx context.Context) error {
		return consume.Run(ctx, pool, "svc", hold, quick(consume.BatchSize(2))...)
	})
	waitClosed(t, inside, "consumer a in its second batch")

	standby := make(chan consume.Progress, 100)
	b := start(t, func(ctx context.Context) error {
		return consume.Run(ctx, pool, "svc", credit("b"), quick(consume.OnProgress(func(p consume.Progress) {
			select {
			case standby <- p:
			default:
			}
		}))...)
	})
	p := waitProgress(t, standby, func(p consume.Progress) bool { return p.Standby })
	if want := (consume.Progress{Name: "svc", Offset: consume.PositionOf(evs[1]), Last: 4, Standby: true}); p != want {
		t.Fatalf("standby progress %+v, want %+v", p, want)
	}
	// a stops with its batch in flight: rolled back; b goes on from 2.
	if err := a.stop(t); err != nil {
		t.Fatalf("a: Run = %v", err)
	}
	close(release)
	more := record(t, pool, makeEvent(5, spec{kind: payments.KindConfirmed}))
	waitOffset(t, pool, "svc", 5)
	if err := b.stop(t); err != nil {
		t.Fatalf("b: Run = %v", err)
	}
	got := int64s(t, pool, `SELECT seq FROM credits ORDER BY n`)
	by := strings.Join(texts(t, pool, `SELECT consumer FROM credits ORDER BY n`), "")
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5}) || by != "aabbb" {
		t.Fatalf("credited %v by %q, want [1 2 3 4 5] by \"aabbb\"", got, by)
	}
	if got, want := balances(t, pool), wantBalances(append(evs, more...)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("balances %v, want %v", got, want)
	}
}

// TestRunStopsCleanly: cancelling the context while a handler works rolls
// the batch back and Run returns nil; the next run credits it once.
func TestRunStopsCleanly(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 3, payments.KindConfirmed)

	inside := make(chan struct{})
	var once sync.Once
	slow := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if err := credit("first")(ctx, tx, e); err != nil {
			return err
		}
		if e.Seq == 2 {
			once.Do(func() { close(inside) })
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", slow, quick()...) })
	waitClosed(t, inside, "the handler at seq 2")
	if err := r.stop(t); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if got := credited(t, pool); len(got) != 0 {
		t.Fatalf("credited %v after a stop mid-batch, want nothing", got)
	}
	if got := offset(t, pool, "svc"); got != (consume.Position{}) {
		t.Fatalf("offset %+v after a stop mid-batch, want the zero position", got)
	}
	r = start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("second"), quick()...) })
	waitOffset(t, pool, "svc", 3)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := credited(t, pool), seqs(evs); !slices.Equal(got, want) {
		t.Fatalf("credited %v, want %v", got, want)
	}
}

// TestRunPermanentError: a handler's Permanent error stops Run with it,
// nothing of the batch committed.
func TestRunPermanentError(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	burns(t, pool, 1, 3, payments.KindConfirmed)
	bad := errors.New("unknown payer")
	h := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if err := credit("svc")(ctx, tx, e); err != nil {
			return err
		}
		if e.Seq == 2 {
			return consume.Permanent(bad)
		}
		return nil
	}
	r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", h, quick()...) })
	err := r.wait(t)
	if !errors.Is(err, bad) || err.Error() != `consumer "svc": handling event 2: unknown payer` {
		t.Fatalf("Run = %v, want the handler's error at event 2", err)
	}
	if got := credited(t, pool); len(got) != 0 {
		t.Fatalf("credited %v, want nothing", got)
	}
}

// TestRunHandlerCannotCommit: the transaction handed to a handler refuses
// Commit and Rollback, so its writes stay tied to the offset.
func TestRunHandlerCannotCommit(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	evs := burns(t, pool, 1, 2, payments.KindConfirmed)
	var refused atomic.Int32
	h := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
		if err := credit("svc")(ctx, tx, e); err != nil {
			return err
		}
		if errors.Is(tx.Commit(ctx), consume.ErrTxOwned) && errors.Is(tx.Rollback(ctx), consume.ErrTxOwned) {
			refused.Add(1)
		}
		return nil
	}
	r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", h, quick()...) })
	waitOffset(t, pool, "svc", 2)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got, want := credited(t, pool), seqs(evs); !slices.Equal(got, want) || refused.Load() != 2 {
		t.Fatalf("credited %v with %d refusals, want %v with 2", got, refused.Load(), want)
	}
}

// TestRunBoundedBatches: no transaction hands over more than BatchSize
// events, and a slow handler's batches are cut at half the BatchTimeout and
// commit what they did, rather than time out.
func TestRunBoundedBatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		give    []consume.Option
		events  int
		delay   time.Duration
		wantMax int64 // most events one transaction credited
	}{
		{name: "batch size", give: []consume.Option{consume.BatchSize(20)}, events: 95, wantMax: 20},
		// 30 events of 100ms each against 500ms of budget per batch.
		{name: "batch time", give: []consume.Option{consume.BatchSize(100), consume.BatchTimeout(time.Second)}, events: 30, delay: 100 * time.Millisecond, wantMax: 29},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			ledger(t, pool)
			var evs []payments.Event
			for i := 0; i < tt.events; i += 10 {
				var batch []payments.Event
				for j := i; j < min(i+10, tt.events); j++ {
					batch = append(batch, makeEvent(j+1, spec{kind: payments.KindConfirmed}))
				}
				evs = append(evs, record(t, pool, batch...)...)
			}
			h := func(ctx context.Context, tx pgx.Tx, e payments.Event) error {
				time.Sleep(tt.delay)
				return credit("svc")(ctx, tx, e)
			}
			reg := prometheus.NewRegistry()
			opts := append([]consume.Option{consume.PollInterval(50 * time.Millisecond), consume.Metrics(reg)}, tt.give...)
			r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", h, opts...) })
			waitOffset(t, pool, "svc", int64(tt.events))
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if got, want := credited(t, pool), seqs(evs); !slices.Equal(got, want) {
				t.Fatalf("credited %v, want %v", got, want)
			}
			sizes := int64s(t, pool, `SELECT count(*) FROM credits GROUP BY txid ORDER BY min(n)`)
			if slices.Max(sizes) > tt.wantMax {
				t.Fatalf("events per transaction %v, want at most %d", sizes, tt.wantMax)
			}
			if got := metric(t, reg, "burnpoller_consumer_failures_total"); got != 0 {
				t.Fatalf("failures_total %v, want 0 (batches %v)", got, sizes)
			}
		})
	}
}

// TestRunProgress: OnProgress and the metrics report the offset, the
// table's last seq and the lag after each batch.
func TestRunProgress(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	var evs []payments.Event
	for i := 1; i <= 10; i++ {
		kind := payments.KindConfirmed
		if i%2 == 1 {
			kind = payments.KindSeen
		}
		evs = append(evs, makeEvent(i, spec{kind: kind}))
	}
	evs = record(t, pool, evs...)
	reports := make(chan consume.Progress, 100)
	reg := prometheus.NewRegistry()
	r := start(t, func(ctx context.Context) error {
		return consume.Run(ctx, pool, "svc", credit("svc"), quick(consume.BatchSize(4), consume.Kinds(payments.KindConfirmed),
			consume.Metrics(reg), consume.OnProgress(func(p consume.Progress) { reports <- p }))...)
	})
	at := func(i int) consume.Position { return consume.PositionOf(evs[i-1]) }
	want := []consume.Progress{
		{Name: "svc", Offset: at(4), Last: 10, Handled: 2},
		{Name: "svc", Offset: at(8), Last: 10, Handled: 2},
		{Name: "svc", Offset: at(10), Last: 10, Handled: 1},
		{Name: "svc", Offset: at(10), Last: 10}, // nothing new
	}
	for i, w := range want {
		if got := waitProgress(t, reports, func(consume.Progress) bool { return true }); got != w {
			t.Fatalf("report %d: %+v (lag %d), want %+v", i, got, got.Lag(), w)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"burnpoller_consumer_offset_seq":     10,
		"burnpoller_consumer_lag_events":     0,
		"burnpoller_consumer_handled_total":  5,
		"burnpoller_consumer_failures_total": 0,
	} {
		if got := metric(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if p := (consume.Progress{Offset: at(4), Last: 10}); p.Lag() != 6 {
		t.Fatalf("Lag() = %d, want 6", p.Lag())
	}
}

// TestRunStartPosition: a new name starts after StartAfter's seq, or after
// the last event with StartAtEnd; a name with an offset ignores both.
func TestRunStartPosition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give consume.Option
		want []int64
	}{
		{name: "default", want: []int64{1, 2, 3, 4, 5}},
		{name: "after 2", give: consume.StartAfter(2), want: []int64{3, 4, 5}},
		{name: "at end", give: consume.StartAtEnd(), want: []int64{4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, _ := pgtest.NewPool(t)
			ledger(t, pool)
			burns(t, pool, 1, 3, payments.KindConfirmed)
			opts := quick()
			if tt.give != nil {
				opts = append(opts, tt.give)
			}
			r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("svc"), opts...) })
			// Registered (at 0, 2 or 3) and caught up before more come.
			waitOffset(t, pool, "svc", 3)
			burns(t, pool, 4, 2, payments.KindConfirmed)
			waitOffset(t, pool, "svc", 5)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			// Started again with another start option: the offset stands.
			r = start(t, func(ctx context.Context) error {
				return consume.Run(ctx, pool, "svc", credit("svc"), quick(consume.StartAfter(0))...)
			})
			burns(t, pool, 6, 1, payments.KindConfirmed)
			waitOffset(t, pool, "svc", 6)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if got, want := credited(t, pool), append(tt.want, 6); !slices.Equal(got, want) {
				t.Fatalf("credited %v, want %v", got, want)
			}
		})
	}
}

// TestOptionsRefused: bad options are refused at once, every problem
// listed.
func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := consume.Run(ctx, pool, "svc", credit("svc"), consume.BatchSize(0), consume.Kinds("paid"),
		consume.Contracts("0x12"), consume.Chains(0), consume.BatchTimeout(time.Millisecond))
	want := `consume: BatchSize 0 is not within 1..10000
Kinds: "paid" is not one of seen, retracted, confirmed
Contracts: "0x12" is not a 0x-prefixed 20-byte hex address
Chains: 0 is not a chain id
BatchTimeout 1ms is below 100ms`
	if err == nil || err.Error() != want {
		t.Fatalf("Run = %v, want\n%s", err, want)
	}
	for _, tt := range []struct {
		name string
		run  func() error
		want string
	}{
		{"empty name", func() error { return consume.Run(ctx, pool, "", credit("svc")) }, "consume: empty consumer name"},
		{"nil handler", func() error { return consume.Run(ctx, pool, "svc", nil) }, `consume: consumer "svc": nil handler`},
		{"nil pool", func() error { return consume.RunAtLeastOnce(ctx, nil, "svc", nil) }, "consume: nil pool"},
	} {
		if err := tt.run(); err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("waiting for %s: nothing after 30s", what)
	}
}

func waitProgress(t *testing.T, c <-chan consume.Progress, ok func(consume.Progress) bool) consume.Progress {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case p := <-c:
			if ok(p) {
				return p
			}
		case <-deadline:
			t.Fatal("no matching progress report within 30s")
		}
	}
}

func texts(t *testing.T, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// metric returns the value of the one gauge or counter named name on reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if m.GetGauge() != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	t.Fatalf("no single metric %s on the registry", name)
	return 0
}

// TestRunOffsetRowDeleted: a consumer whose offset row is deleted while it
// runs stops rather than start again from its first event; so does every
// later start of the name, in either mode (a supervisor's restart, a
// deploy), until the offset is set with Reset: before, the next start
// registered the name afresh and credited every payment again. Reset
// refuses a seq the table does not hold.
func TestRunOffsetRowDeleted(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ledger(t, pool)
	burns(t, pool, 1, 2, payments.KindConfirmed)
	r := start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("svc"), quick()...) })
	waitOffset(t, pool, "svc", 2)
	execSQL(t, pool, `DELETE FROM consumer_offsets`)
	burns(t, pool, 3, 1, payments.KindConfirmed)
	err := r.wait(t)
	want := `consumer "svc": consumer offset row is gone (deleted?): refusing to start again from its start position; restore it, or set it with consume.Reset`
	if !errors.Is(err, consume.ErrNoOffset) || err.Error() != want {
		t.Fatalf("Run = %v, want %s", err, want)
	}
	if got := credited(t, pool); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("credited %v, want [1 2]", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		for mode, err := range map[string]error{
			"Run": consume.Run(ctx, pool, "svc", credit("svc"), quick()...),
			"RunAtLeastOnce": consume.RunAtLeastOnce(ctx, pool, "svc", func(context.Context, payments.Event) error {
				t.Error("handler called")
				return nil
			}, quick()...),
		} {
			if !errors.Is(err, consume.ErrNoOffset) || !strings.Contains(err.Error(), "consume.Reset") {
				t.Fatalf("%s started again after its offset row was deleted = %v, want ErrNoOffset naming consume.Reset", mode, err)
			}
		}
	}
	if got := credited(t, pool); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("credited %v after the restarts, want [1 2]", got)
	}
	if err := consume.Reset(ctx, pool, "svc", 9); !errors.Is(err, consume.ErrNoEvent) {
		t.Fatalf("Reset to seq 9 of 3 = %v, want ErrNoEvent", err)
	}
	if err := consume.Reset(ctx, pool, "svc", 2); err != nil {
		t.Fatal(err)
	}
	r = start(t, func(ctx context.Context) error { return consume.Run(ctx, pool, "svc", credit("svc"), quick()...) })
	waitOffset(t, pool, "svc", 3)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := credited(t, pool); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("credited %v, want [1 2 3]", got)
	}
}
