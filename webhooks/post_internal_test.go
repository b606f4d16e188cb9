package webhooks

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/internal/hostile"
	"github.com/burnpoller/burnpoller/payments"
)

// TestReceiverHeadersAreCapped: a receiver answering with 9 MiB of headers
// (within net/http's default limit of 10 MiB) fails the attempt after a
// small part of them is read: any receiver could send such answers to
// every replica (eight grew the heap by 334 MiB). Not parallel: it
// measures allocation.
func TestReceiverHeadersAreCapped(t *testing.T) {
	url := hostile.Serve(t, hostile.Response(http.StatusOK, hostile.ShortHeaders(9<<20), ""))
	eps, err := ParseEndpoints(url + "/hooks")
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Endpoints: eps, Secret: "whsec_test_0123456789", Timeout: 30 * time.Second}, nil, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	var (
		status  int
		problem string
	)
	alloc := hostile.Allocated(func() { status, problem = d.post(t.Context(), eps[0], payments.Event{EventID: "1:0x01:0:seen:0x02"}) })
	t.Logf("9 MiB of headers: %.2f MiB allocated; status %d, %q", float64(alloc)/(1<<20), status, problem)
	if status != 0 || !strings.Contains(problem, "header") {
		t.Fatalf("status %d, problem %q: want no answer, for its headers", status, problem)
	}
	if alloc > 2<<20 {
		t.Fatalf("%d bytes allocated for 9 MiB of headers, want at most 2 MiB", alloc)
	}
}
