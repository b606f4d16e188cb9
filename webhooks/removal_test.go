package webhooks_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/burnpoller/burnpoller/internal/pgtest"
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
