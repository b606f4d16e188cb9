package poller_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// TestACancelledCallIsNotAnEndpointError: a call the poller gave up on
// counts as a request, never as the endpoint's error.
func TestACancelledCallIsNotAnEndpointError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		give       string
		wantErrors float64
	}{
		{"ok", chain.ResultOK, 0},
		{"canceled", chain.ResultCanceled, 0},
		{"transient", string(chain.ClassTransient), 1},
		{"throttled", string(chain.ClassThrottled), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := poller.NewMetrics(prometheus.NewRegistry(), "t", "t", "t")
			m.RPC("e", "eth_getLogs", tt.give, 0)
			if n := testutil.ToFloat64(m.RPCRequests.WithLabelValues("eth_getLogs", tt.give)); n != 1 {
				t.Fatalf("requests{result=%q} = %v, want 1", tt.give, n)
			}
			if n := testutil.CollectAndCount(m.RPCErrors); float64(n) != tt.wantErrors {
				t.Fatalf("%d error series, want %v", n, tt.wantErrors)
			}
		})
	}
}
