// Package hostile is for tests of the bounds on what a peer sends: an HTTP
// server that answers every request with raw bytes of the test's making (a
// node or a webhook receiver gone bad), and a measure of what handling the
// answer allocated.
package hostile

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
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
