package webhooks_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

// TestADeletedEndpointRowLosesNoEvent: the endpoint's row is deleted (the
// documented removal procedure (docs/webhooks.md), done in the wrong order) while a replica
// still lists the URL. The replica notices, registers the endpoint again
// from where delivery stood, counts it in a metric and says so; every
// event, those committed while the row was gone included, reaches the
// receiver. A replica started afterwards with the URL still listed, after
// another deletion, resumes there too rather than from "now".
func TestADeletedEndpointRowLosesNoEvent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	hold := make(chan struct{}) // the receiver is down until closed
	r := newReceiver(t, func(string, int) int {
		select {
		case <-hold:
			return http.StatusNoContent
		default:
			return http.StatusServiceUnavailable
		}
	})
	ep := endpoint(t, r.listen("127.0.0.1:0"))
	x := startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	first := addEvents(t, pool, 3) // queued, not delivered: the receiver is down
	waitUntil(t, "the first events queued", func() bool { return len(deliveryRows(t, pool)) == 3 })
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE endpoint = $1`, ep.Label); err != nil {
		t.Fatal(err)
	}
	second := addEvents(t, pool, 4)
	close(hold)
	all := append(first, second...)
	waitUntil(t, "every event delivered", func() bool {
		for _, e := range all {
			if !r.delivered(e.EventID) {
				return false
			}
		}
		return true
	})
	m, err := testutil.CollectAndFormat(x.reg, expfmt.TypeTextPlain, "burnpoller_webhook_endpoint_reregistered_total")
	if want := `burnpoller_webhook_endpoint_reregistered_total{endpoint="` + ep.Label + `"} 1`; err != nil || !strings.Contains(string(m), want) {
		t.Fatalf("metrics %s (%v), want %s", m, err, want)
	}
	x.stop()

	// Deleted again with no replica running; a replica started with the
	// URL resumes where delivery stood.
	if _, err := pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE endpoint = $1`, ep.Label); err != nil {
		t.Fatal(err)
	}
	third := addEvents(t, pool, 2)
	startDispatcher(t, pool, webhooks.Config{Endpoints: []webhooks.Endpoint{ep}})
	waitUntil(t, "the events committed while no row existed delivered", func() bool {
		return r.delivered(third[0].EventID) && r.delivered(third[1].EventID)
	})
	// Registering again consumed the record: adding the endpoint back
	// "from now" is a matter of deleting both rows.
	var removed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints_removed`).Scan(&removed); err != nil || removed != 0 {
		t.Fatalf("%d rows in webhook_endpoints_removed (%v), want 0", removed, err)
	}
}

// TestATokenHiddenInTheLabelLosesNoEvent: an endpoint whose host holds a
// token was registered, by an earlier version, under a label showing it.
// Registered under its new label, which hides the token, it starts where
// delivery under the old one stood: the event delivered there is not sent
// again, the one queued and the one not queued yet are, and so is every
// later one. The old row is left to the removal procedure.
func TestATokenHiddenInTheLabelLosesNoEvent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.NewPool(t)
	ctx := context.Background()
	r := newReceiver(t, func(string, int) int { return http.StatusNoContent })
	addr := r.listen("127.0.0.1:0")
	const hostToken = "eofyfyh52mz68hy"
	eps, err := webhooks.ParseEndpoints("http://" + hostToken + ".m.pipedream.net/hooks/" + token)
	if err != nil {
		t.Fatal(err)
	}
	ep, legacy := eps[0], webhooks.LegacyLabel(eps[0])
	if strings.Contains(ep.Label, hostToken) || !strings.Contains(legacy, hostToken) {
		t.Fatalf("label %q, legacy label %q: want the token in the legacy one alone", ep.Label, legacy)
	}
	// What the earlier version left: events[0] delivered, events[1]
	// queued and not delivered, events[2] not queued yet.
	events := addEvents(t, pool, 3)
	if _, err := pool.Exec(ctx, `
		WITH ep AS (INSERT INTO webhook_endpoints (endpoint, events, enqueued_seq) VALUES ($1, $2, $4))
		INSERT INTO webhook_deliveries (endpoint, seq, event_id, delivered_at)
		SELECT $1, e.seq, e.event_id, CASE WHEN e.seq = $3 THEN now() END
		FROM payment_events e WHERE e.seq IN ($3, $4)`, legacy, payments.Kinds, events[0].Seq, events[1].Seq); err != nil {
		t.Fatal(err)
	}
	startDispatcher(t, pool, webhooks.Config{Endpoints: eps}, func(d *webhooks.Dispatcher) { webhooks.DialAllTo(d, addr) })
	later := addEvents(t, pool, 2)
	var want []int64
	for _, e := range append(events[1:], later...) {
		waitUntil(t, "event "+e.EventID+" delivered", func() bool { return r.delivered(e.EventID) })
		want = append(want, e.Seq)
	}
	// Registered from where delivery under the legacy label stood: the
	// new label's deliveries are every event after the one delivered, and
	// that one is not among them (read once they are all delivered: the
	// endpoint's enqueued_seq moves on as the dispatcher queues).
	var queued []int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(seq ORDER BY seq), '{}') FROM webhook_deliveries WHERE endpoint = $1`, ep.Label).
		Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(queued, want) {
		t.Fatalf("deliveries under the new label: seqs %v, want %v (every event after the one delivered under the legacy label)", queued, want)
	}
	if n := r.triesOf(events[0].EventID); n != 0 {
		t.Fatalf("the event delivered under the legacy label was sent %d times again", n)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints WHERE endpoint = $1`, legacy).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d legacy rows (%v), want it left as it was", left, err)
	}
}
