package chain_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/hostile"
)

// cut is err's text, cut for a test log.
func cut(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 300 {
		return fmt.Sprintf("%s… (%d bytes)", s[:300], len(s))
	}
	return s
}

// TestNodeErrorTextIsCut: whatever a node answers, the error it gives, and
// so every log line of a failed poll, holds a bounded part of it (a 4 MiB
// body of a 500 gave a 4 MiB error).
func TestNodeErrorTextIsCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 4<<20)
	tests := []struct {
		name   string
		status int
		body   string
		want   chain.Class
	}{
		{"a 500 with a long body", http.StatusInternalServerError, long, chain.ClassTransient},
		{"a 429 with a long body", http.StatusTooManyRequests, long, chain.ClassThrottled},
		{"a 400 with a long JSON-RPC message", http.StatusBadRequest, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found ` + long[:32<<10] + `"}}`, chain.ClassTransient},
		{"a long JSON-RPC message", http.StatusOK, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found ` + long + `"}}`, chain.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := hostile.Serve(t, hostile.Response(tt.status, "", tt.body))
			c, err := chain.Dial(t.Context(), url, chain.Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.ChainID(t.Context())
			if got := chain.ClassOf(err); got != tt.want {
				t.Fatalf("class %s, want %s: %v", got, tt.want, cut(err))
			}
			if n := len(err.Error()); n > 1<<10 {
				t.Fatalf("a %d-byte error from a %d-byte body: %s", n, len(tt.body), cut(err))
			}
		})
	}
}

// TestResponseHeadersAreCapped: a node answering with 9 MiB of headers
// (within net/http's default limit of 10 MiB, and gorilla/websocket reads
// a handshake's without any) gets a transient error after a small part of
// them is read (four such replies grew the heap by up to 235 MiB).
func TestResponseHeadersAreCapped(t *testing.T) {
	tests := []struct {
		name  string
		reply []byte
		ws    bool
		// limit is the most allocated: the 64 KiB of headers read over
		// HTTP, the 128 KiB read until a WebSocket connection is up (TLS's
		// included) cost about 12 times as much as short header lines.
		limit uint64
	}{
		{"HTTP", hostile.Response(http.StatusOK, hostile.ShortHeaders(9<<20), `{"jsonrpc":"2.0","id":1,"result":"0x1"}`), false, 2 << 20},
		{"WebSocket handshake", hostile.Response(http.StatusSwitchingProtocols, hostile.ShortHeaders(9<<20), ""), true, 4 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hostile.Serve(t, tt.reply)
			if tt.ws {
				url = "ws" + strings.TrimPrefix(url, "http")
			}
			c, err := chain.Dial(t.Context(), url, chain.Options{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var callErr error
			alloc := hostile.Allocated(func() { _, callErr = c.ChainID(t.Context()) })
			t.Logf("9 MiB of headers: %.2f MiB allocated; %v", float64(alloc)/(1<<20), cut(callErr))
			if callErr == nil || chain.ClassOf(callErr) != chain.ClassTransient {
				t.Fatalf("error = %v, want a transient one", cut(callErr))
			}
			if alloc > tt.limit {
				t.Fatalf("%d bytes allocated for 9 MiB of headers, want at most %d", alloc, tt.limit)
			}
		})
	}
}
