// Package hostile is for tests of the bounds on what a peer sends: an HTTP
// server that answers every request with raw bytes of the test's making (a
// node or a webhook receiver gone bad), a JSON-RPC node over HTTP and
// WebSocket whose replies the test makes, and a measure of what handling
// the answer allocated.
package hostile

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// Serve answers every request with raw, a whole HTTP/1.1 response (status
// line, headers, body) written on the hijacked connection, which is then
// closed: the server allocates next to nothing of its own, so what a test
// measures is the client's. It returns the server's URL.
func Serve(t testing.TB, raw []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.Write(raw)
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Response is an HTTP/1.1 response of status with a JSON body and the
// extra header lines headers (each ending in CRLF).
func Response(status int, headers, body string) []byte {
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s",
		status, http.StatusText(status), len(body), headers, body)
}

// ShortHeaders is about n bytes of short header lines: for net/http, a
// value each in the response's Header, the most costly headers per byte.
func ShortHeaders(n int) string {
	const line = "X: 1\r\n"
	return strings.Repeat(line, n/len(line))
}

// Allocated is what f allocated (runtime.MemStats.TotalAlloc): a bound on
// how far f could have grown the heap, whatever the collector did
// meanwhile. It counts every goroutine's allocations, so a test using it
// does not run in parallel with others.
func Allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Call is one JSON-RPC call of a request a Node answers.
type Call struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// Node is a JSON-RPC node for tests, over HTTP and WebSocket on one
// server, that answers each request (a call, or with batch a batch) with
// the pieces answer makes of it, written one after another as one reply: an HTTP
// body (the connection then closed) or one WebSocket message. The pieces
// may be the test's own large copies, shared by every reply, so that the
// server allocates next to nothing of its own and what a test measures is
// the client's. It returns the node's http:// and ws:// URLs.
func Node(t testing.TB, answer func(calls []Call, batch bool) [][]byte) (httpURL, wsURL string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if websocket.IsWebSocketUpgrade(r) {
			serveWS(w, r, answer)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		pieces := answer(calls(body))
		n := 0
		for _, p := range pieces {
			n += len(p)
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", n)
		for _, p := range pieces {
			_, _ = buf.Write(p)
		}
		_ = buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// serveWS answers each message of a WebSocket connection as Node does.
func serveWS(w http.ResponseWriter, r *http.Request, answer func([]Call, bool) [][]byte) {
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
		wr, err := conn.NextWriter(websocket.TextMessage)
		if err != nil {
			return
		}
		for _, p := range answer(calls(msg)) {
			_, _ = wr.Write(p)
		}
		if wr.Close() != nil {
			return
		}
	}
}

// calls are the calls of a request: a batch's, or the one call.
func calls(body []byte) ([]Call, bool) {
	var batch []Call
	if json.Unmarshal(body, &batch) == nil {
		return batch, true
	}
	var one Call
	_ = json.Unmarshal(body, &one)
	return []Call{one}, false
}
