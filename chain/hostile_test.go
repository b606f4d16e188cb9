package chain_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/hostile"
)

// emptyObjects is a JSON array of n empty objects: 3 bytes each on the
// wire, and a map and an interface each if decoded into any.
func emptyObjects(n int) string {
	return "[" + strings.Repeat("{},", n-1) + "{}]"
}

// TestErrorDataIsReadBounded: a node whose error carries a data of 7 MiB
// of empty objects, inside the reply cap, costs the client a small multiple
// of the reply, over a batch and over a single call alike (decoded into
// maps it grew the heap by over 200 MiB). The error is still classified
// by its code and message.
func TestErrorDataIsReadBounded(t *testing.T) {
	data := emptyObjects(7 << 20 / 3)
	errObj := `"error":{"code":-32000,"message":"header not found","data":` + data + `}`
	tests := []struct {
		name string
		body string
		call func(context.Context, *chain.Client) error
	}{
		{
			name: "batch",
			body: `[{"jsonrpc":"2.0","id":0,` + errObj + `}]`,
			call: func(ctx context.Context, c *chain.Client) error {
				_, err := c.HeadersByNumber(ctx, []uint64{1})
				return err
			},
		},
		{
			name: "single call",
			body: `{"jsonrpc":"2.0","id":1,` + errObj + `}`,
			call: func(ctx context.Context, c *chain.Client) error {
				_, err := c.ChainID(ctx)
				return err
			},
		},
	}
	for _, tt := range tests {
		for _, ws := range []bool{false, true} {
			name := tt.name + map[bool]string{false: " over HTTP", true: " over WebSocket"}[ws]
			t.Run(name, func(t *testing.T) {
				url := hostile.Serve(t, hostile.Response(http.StatusOK, "", tt.body))
				if ws {
					url = hostileWS(t, tt.body)
				}
				c, err := chain.Dial(t.Context(), url, chain.Options{Timeout: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var callErr error
				alloc := hostile.Allocated(func() { callErr = tt.call(t.Context(), c) })
				t.Logf("a %d-byte reply: %.1f MiB allocated; %v", len(tt.body), float64(alloc)/(1<<20), cut(callErr))
				if chain.ClassOf(callErr) != chain.ClassTransient || !strings.Contains(callErr.Error(), "header not found") {
					t.Fatalf("error = %v, want the node's transient error", cut(callErr))
				}
				if limit := uint64(4 * len(tt.body)); alloc > limit {
					t.Fatalf("%d bytes allocated for a %d-byte reply, want at most %d", alloc, len(tt.body), limit)
				}
			})
		}
	}
}

// hostileWS is a WebSocket node that answers every request with reply, its
// id (a batch's first) put in place of the reply's first id: written from
// the one copy in pieces, so that the server allocates next to nothing.
// The client dials it on its first call.
func hostileWS(t *testing.T, reply string) string {
	t.Helper()
	idAt := strings.Index(reply, `"id":`) + len(`"id":`)
	idEnd := idAt + strings.IndexAny(reply[idAt:], ",}")
	before, after := []byte(reply[:idAt]), []byte(reply[idEnd:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			id := regexp.MustCompile(`"id":(\d+)`).FindSubmatch(msg)
			if id == nil {
				return
			}
			wr, err := conn.NextWriter(websocket.TextMessage)
			if err != nil {
				return
			}
			_, _ = wr.Write(before)
			_, _ = wr.Write(id[1])
			_, _ = wr.Write(after)
			_ = wr.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

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
