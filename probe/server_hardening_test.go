package probe_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/probe"
)

// Values set in probe.Listen and probe.Handler that these tests pin.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	bodyLimit         = 4 << 10
)

// serveHandler starts a probe server for h on a loopback port and returns
// its address (host:port); at the end it stops it, twice (the second Stop
// must be harmless).
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv, err := probe.Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		// A guard only: Stop returns as soon as the connections are idle.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
	return srv.Addr().String()
}

// TestReadHeaderTimeoutDisconnectsSlowClients proves that a client that never
// finishes its request header is hung up on by the read-header timeout,
// however it dribbles the header in, and not later by the read timeout.
//
// The proof is an order of events, not a measured duration: a control
// connection opened first sends a whole header and then never its body, so
// only the read timeout (10 s, twice the header's 5 s) can cut it off, which
// the server's handler reports. Every slow connection must be hung up on
// before that happens. Without the read-header timeout net/http falls back
// to the read timeout, which the control, opened earlier, reaches first; a
// read-header timeout raised to the read timeout or beyond fails the same
// way. The slow clients give up only after a minute, a guard against a
// server that never hangs up. Hanging up sooner than the read-header
// timeout (a lower bound, which load cannot break) fails too.
//
// All connections are opened before any is waited on, so the test takes one
// read-header timeout whatever the -parallel setting.
func TestReadHeaderTimeoutDisconnectsSlowClients(t *testing.T) { //nolint:tparallel // the cases share one clock: all connections are open before any is waited on
	t.Parallel()
	// cut is closed when the read timeout ends the control's body read.
	cut := make(chan struct{})
	var cutOnce sync.Once
	entered := make(chan struct{}, 1)
	bodyReader := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		_, err := io.Copy(io.Discard, r.Body)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			cutOnce.Do(func() { close(cut) })
		}
	})
	addr := serveHandler(t, probe.Handler(func() error { return nil }, nil, bodyReader))

	control, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { control.Close() })
	mustWrite(t, control, "GET /metrics HTTP/1.1\r\nHost: probe\r\nContent-Length: 100\r\n\r\n")
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the control request never reached its handler")
	}
	// Drives the scenario only: the slow connections start a little after
	// the control, so that a read timeout on them would come after its own.
	time.Sleep(500 * time.Millisecond)

	tests := []struct {
		name string
		// send writes what the client sends; it must not finish a request
		// header. br reads the connection. It runs on the parent test.
		send func(t *testing.T, c net.Conn, br *bufio.Reader)
		// wantReply is what the server writes before hanging up: nothing,
		// except that net/http parses a request line cut short by the
		// deadline as if it were whole, and so answers 400.
		wantReply string
	}{
		{
			name: "nothing sent",
			send: func(*testing.T, net.Conn, *bufio.Reader) {},
		},
		{
			name: "partial request line",
			send: func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				t.Helper()
				mustWrite(t, c, "GET /livez HT")
			},
			wantReply: "HTTP/1.1 400 Bad Request\r\n",
		},
		{
			name: "headers without the final blank line",
			send: func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				t.Helper()
				mustWrite(t, c, "GET /livez HTTP/1.1\r\nHost: probe\r\nUser-Agent: slow\r\n")
			},
		},
		{
			// Slowloris: a byte every 250 ms keeps the connection busy but
			// must not push the header deadline back.
			name: "header trickled a byte at a time",
			send: func(t *testing.T, c net.Conn, _ *bufio.Reader) {
				t.Helper()
				mustWrite(t, c, "GET /livez HTTP/1.1\r\nHost: probe\r\nX-Slow: ")
				ctx := t.Context()
				var wg sync.WaitGroup
				t.Cleanup(wg.Wait) // runs after ctx is cancelled
				wg.Go(func() {
					tick := time.NewTicker(250 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
						if _, err := c.Write([]byte("a")); err != nil {
							return // the server hung up
						}
					}
				})
			},
		},
		{
			// The timeout applies to every request on a kept-alive
			// connection, not only to the first.
			name: "second request on a kept-alive connection",
			send: func(t *testing.T, c net.Conn, br *bufio.Reader) {
				t.Helper()
				mustWrite(t, c, "GET /livez HTTP/1.1\r\nHost: probe\r\n\r\n")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Close {
					t.Fatalf("first request: status %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
				}
				mustWrite(t, c, "GET /readyz HTTP/1.1\r\nHost: probe\r\n")
			},
		},
	}

	// hangUp is how a slow connection ended, recorded by its reader the
	// moment the server hung up.
	type hangUp struct {
		got       []byte
		err       error
		elapsed   time.Duration
		afterRead bool // the control had been cut off by then
	}
	ended := make([]chan hangUp, len(tests))
	for i, tt := range tests {
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.SetReadDeadline(start.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		tt.send(t, c, br)
		ended[i] = make(chan hangUp, 1)
		go func() {
			got, err := io.ReadAll(br)
			h := hangUp{got: got, err: err, elapsed: time.Since(start)}
			select {
			case <-cut:
				h.afterRead = true
			default:
			}
			ended[i] <- h
		}()
	}

	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := <-ended[i]
			var ne net.Error
			switch {
			case errors.As(h.err, &ne) && ne.Timeout():
				t.Fatalf("connection still open a minute on; want it closed by the %v read-header timeout", readHeaderTimeout)
			case h.err != nil && !errors.Is(h.err, syscall.ECONNRESET):
				t.Fatalf("reading: %v", h.err)
			}
			if h.afterRead {
				t.Errorf("hung up only after the %v read timeout had cut off a request opened before; want the %v read-header timeout", readTimeout, readHeaderTimeout)
			}
			if !strings.HasPrefix(string(h.got), tt.wantReply) || (tt.wantReply == "" && len(h.got) != 0) {
				t.Errorf("server sent %q before hanging up; want %q", h.got, tt.wantReply)
			}
			// The server's clock starts after the dial began, so it cannot
			// hang up sooner; the slack only absorbs timer rounding.
			if h.elapsed < readHeaderTimeout-100*time.Millisecond {
				t.Errorf("hung up after %v; want no sooner than the %v read-header timeout", h.elapsed.Round(time.Millisecond), readHeaderTimeout)
			}
			t.Logf("hung up after %v", h.elapsed.Round(time.Millisecond))
		})
	}
}

// TestRequestBodyLimit proves that a handler behind probe.Handler cannot
// read more than 4 KiB of a request body: the read stops at the limit with
// an *http.MaxBytesError, and net/http then closes the connection instead of
// draining the rest. The probe handlers themselves never read the body, so
// the /metrics handler, the only one supplied by the caller, is used to read.
func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	// The handler reports what it read in headers, and answers 413 when the
	// limit stops it, as a body-reading handler should.
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Read", strconv.FormatInt(n, 10))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			w.Header().Set("X-Limit", strconv.FormatInt(mbe.Limit, 10))
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			_, _ = io.WriteString(w, "burnpoller_up 1\n")
		}
	})
	base := "http://" + serveHandler(t, probe.Handler(func() error { return nil }, nil, metrics))

	tests := []struct {
		name      string
		size      int
		chunked   bool // send without a Content-Length
		wantCode  int
		wantRead  int
		wantLimit string // X-Limit: the limit reported by the MaxBytesError
		wantClose bool   // the server ends the connection after the reply
	}{
		{name: "no body", size: 0, wantCode: http.StatusOK, wantRead: 0},
		{name: "exactly the limit", size: bodyLimit, wantCode: http.StatusOK, wantRead: bodyLimit},
		{name: "one byte over", size: bodyLimit + 1, wantCode: http.StatusRequestEntityTooLarge, wantRead: bodyLimit, wantLimit: "4096", wantClose: true},
		{name: "1 MiB", size: 1 << 20, wantCode: http.StatusRequestEntityTooLarge, wantRead: bodyLimit, wantLimit: "4096", wantClose: true},
		{name: "1 MiB chunked", size: 1 << 20, chunked: true, wantCode: http.StatusRequestEntityTooLarge, wantRead: bodyLimit, wantLimit: "4096", wantClose: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), tt.size))
			if tt.chunked {
				body = io.MultiReader(body) // hides the length from the client
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", body)
			if err != nil {
				t.Fatal(err)
			}
			resp := roundTrip(t, req)
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if got := resp.Header.Get("X-Read"); got != strconv.Itoa(tt.wantRead) {
				t.Errorf("handler read %s bytes, want %d", got, tt.wantRead)
			}
			if got := resp.Header.Get("X-Limit"); got != tt.wantLimit {
				t.Errorf("MaxBytesError limit = %q, want %q", got, tt.wantLimit)
			}
			if resp.Close != tt.wantClose {
				t.Errorf("Connection: close = %v, want %v", resp.Close, tt.wantClose)
			}
		})
	}
}

// TestNonGetMethodsAreRejected complements TestOnlyGetOnKnownPaths: every
// other method on each probe path gets 405 with the methods that are allowed,
// and no probe, check or metrics code runs.
func TestNonGetMethodsAreRejected(t *testing.T) { //nolint:tparallel // the cases share one server, each a request on it in turn
	t.Parallel()
	var calls atomic.Int64
	live := func() error { calls.Add(1); return nil }
	checks := []probe.Check{{Name: "database", Func: func(context.Context) error { calls.Add(1); return nil }}}
	metrics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) })
	base := "http://" + serveHandler(t, probe.Handler(live, checks, metrics))

	for _, path := range []string{"/livez", "/readyz", "/metrics"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
			t.Run(method+" "+path, func(t *testing.T) {
				req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader("{}"))
				if err != nil {
					t.Fatal(err)
				}
				resp := roundTrip(t, req)
				if resp.StatusCode != http.StatusMethodNotAllowed {
					t.Errorf("status = %d, want 405", resp.StatusCode)
				}
				if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
					t.Errorf("Allow = %q, want %q", got, "GET, HEAD")
				}
			})
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("probe, check or metrics code ran %d times for rejected methods", n)
	}
}

// TestRequestHeaderSizeLimit proves the 16 KiB header limit: net/http allows
// 4 KiB of slack over MaxHeaderBytes, and answers 431 beyond it. Without the
// limit, the default of 1 MiB would let the large header through.
func TestRequestHeaderSizeLimit(t *testing.T) {
	t.Parallel()
	base := "http://" + serveHandler(t, probe.Handler(func() error { return nil }, nil, http.NotFoundHandler()))
	tests := []struct {
		name     string
		size     int
		wantCode int
	}{
		{name: "8 KiB", size: 8 << 10, wantCode: http.StatusOK},
		{name: "32 KiB", size: 32 << 10, wantCode: http.StatusRequestHeaderFieldsTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/livez", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Pad", strings.Repeat("a", tt.size))
			if resp := roundTrip(t, req); resp.StatusCode != tt.wantCode {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantCode)
			}
		})
	}
}

// roundTrip sends req on a transport of its own, so that a connection one
// case gets closed is never reused by another, and returns the reply with
// its body read and closed.
func roundTrip(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp
}

func mustWrite(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := fmt.Fprint(c, s); err != nil {
		t.Fatal(err)
	}
}
