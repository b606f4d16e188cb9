package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// TestWebsocketEndpointsInRPCURL: RPC_URL may list ws endpoints beside http
// ones. A ws endpoint where nothing listens, listed before or after a
// working http one, neither stops start-up nor the ledger; and a replica
// whose only endpoint is the node's WebSocket records the chain exactly.
func TestWebsocketEndpointsInRPCURL(t *testing.T) {
	t.Parallel()
	_, info := startDevchain(t, "--block-time", "100ms", "--burn-rate", "5")
	dead := "ws://" + freeAddr(t)
	tests := []struct {
		name   string
		rpcURL string
		// handOver: the dead endpoint is listed first and the http one
		// takes over from it.
		handOver bool
	}{
		{"http first, dead ws backup", info.RPCURL + "," + dead, false},
		{"dead ws first, http second", dead + "," + info.RPCURL, true},
		{"the node's ws only", info.WSURL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, dbURL := pgtest.NewPool(t)
			addr := freeAddr(t)
			p := startProc(t, "poller", pollerEnv(dbURL, tt.rpcURL, info, addr), "poller")
			waitFor(t, time.Minute, "/livez 200", func() bool {
				select {
				case <-p.done:
					t.Fatalf("poller exited during start-up (%v):\n%s", p.err, tail(p.out.String(), 30))
				default:
				}
				return httpStatus("http://"+addr+"/livez") == 200
			})
			final := waitFinalized(t, info.RPCURL, 64)
			waitFor(t, 2*time.Minute, fmt.Sprintf("the cursor at the finalized block %d", final), func() bool {
				return cursorBlock(t, pool) >= int64(final)
			})
			if strings.Contains(tt.rpcURL, dead) {
				// The dead endpoint was tried, and failed as a transient error.
				sample := fmt.Sprintf(`burnpoller_rpc_errors_total{class="transient",endpoint=%q}`, chain.RedactURL(dead))
				if v, ok := scrape(addr, sample); !ok || v < 1 {
					t.Fatalf("%s = %v (present: %v), want at least 1", sample, v, ok)
				}
			}
			if tt.handOver {
				sample := fmt.Sprintf(`burnpoller_endpoint_active{endpoint=%q}`, chain.RedactURL(info.RPCURL))
				if v, ok := scrape(addr, sample); !ok || v != 1 {
					t.Fatalf("%s = %v (present: %v), want 1", sample, v, ok)
				}
			}
			p.signal(syscall.SIGTERM)
			if code := p.wait(t, 15*time.Second); code != 0 {
				t.Fatalf("exit %d", code)
			}
			rows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, pool)))
			if len(rows) == 0 {
				t.Fatalf("no burns up to block %d: nothing was compared", cursorBlock(t, pool))
			}
		})
	}
}
