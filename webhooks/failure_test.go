package webhooks_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

// The secrets of the URLs of TestDeliveryErrorsNameTheEndpointByItsLabel:
// a token as a host label (as in https://<token>.m.pipedream.net, under
// .invalid, which never resolves), user info, a path token and a bare
// query key.
const (
	hostToken = "secrettoken123"
	userPass  = "hookpass99"
	bareKey   = "Zx81kQ0pLmN2vB7c"
)

// secretURL is an endpoint's URL holding every secret above, on port.
func secretURL(scheme, port string) string {
	host := hostToken + ".invalid"
	if port != "" {
		host += ":" + port
	}
	return urlOn(scheme, host)
}

// urlOn is an endpoint's URL on host holding every secret above but the
// host's.
func urlOn(scheme, host string) string {
	return scheme + "://hook:" + userPass + "@" + host + "/hooks/" + token + "?" + bareKey
}

// TestDeliveryErrorsNameTheEndpointByItsLabel: for each class of failure
// (DNS, connection refused or closed, timeout, TLS, an HTTP status, a
// redirect), through a real receiver or a name that does not resolve, the
// error names the endpoint by its label and keeps the class, and no
// secret of the URL is in the log, webhook_deliveries.last_error, the
// status, the attempt's signal or the metrics.
func TestDeliveryErrorsNameTheEndpointByItsLabel(t *testing.T) {
	t.Parallel()
	closedPort := func(t *testing.T) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	plain := func(t *testing.T, status int) string {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Read whole, so that the server notices the client
			// going away (it reads on only then).
			_, _ = io.Copy(io.Discard, r.Body)
			if status == 0 {
				<-r.Context().Done()
				return
			}
			if status == http.StatusFound {
				w.Header().Set("Location", secretURL("https", "")+"&moved")
			}
			w.WriteHeader(status)
		}))
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	tlsServer := func(t *testing.T) *httptest.Server {
		t.Helper()
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		t.Cleanup(srv.Close)
		return srv
	}
	hangUp := func(t *testing.T) string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// The whole request read, then no answer.
				if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					_, _ = io.Copy(io.Discard, req.Body)
				}
				c.Close()
			}
		}()
		return ln.Addr().String()
	}
	tests := []struct {
		name string
		// setup returns the URL, the address every connection goes to
		// ("" for none: the name is looked up) and what to do to the
		// dispatcher before it runs (nil for nothing).
		setup func(t *testing.T) (url, dialTo string, prepare func(*webhooks.Dispatcher))
		// want is the failure's text after "POST <label>: "; one ending
		// in ": " is its start.
		want string
	}{
		// Under .invalid, no resolver knows the name: "no such host",
		// or, with no resolver answering, another DNS failure.
		{
			name: "dns",
			setup: func(*testing.T) (string, string, func(*webhooks.Dispatcher)) {
				return secretURL("https", ""), "", nil
			},
			want: "dns: ",
		},
		{
			name: "refused",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("http", "8080"), closedPort(t), nil
			},
			want: "connect: connection refused",
		},
		{
			name: "closed without an answer",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("http", "8080"), hangUp(t), nil
			},
			want: "the endpoint closed the connection without an answer",
		},
		{
			name: "timeout",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("http", "8080"), plain(t, 0), nil
			},
			want: "timeout (WEBHOOK_TIMEOUT)",
		},
		{
			// On a host the certificate names: the name is checked
			// first.
			name: "tls, unknown authority",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return urlOn("https", "example.com:8443"), tlsServer(t).Listener.Addr().String(), nil
			},
			want: "tls: the certificate is signed by an unknown authority",
		},
		{
			// x509's own text: "certificate is valid for example.com,
			// not secrettoken123.invalid".
			name: "tls, another host's certificate",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				srv := tlsServer(t)
				return secretURL("https", "8443"), srv.Listener.Addr().String(), func(d *webhooks.Dispatcher) {
					webhooks.TrustRoots(d, srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs)
				}
			},
			want: "tls: the certificate is not valid for the endpoint's host",
		},
		{
			name: "tls, answered in plain HTTP",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("https", "8443"), plain(t, http.StatusNoContent), nil
			},
			want: "tls: the endpoint answered in plain HTTP",
		},
		{
			// A failure of no known class keeps its text, scrubbed of
			// every part of the URL however it is quoted.
			name: "unknown failure quoting the URL",
			setup: func(*testing.T) (string, string, func(*webhooks.Dispatcher)) {
				return secretURL("https", ""), "", func(d *webhooks.Dispatcher) {
					d.SetTransport(roundTripper(func(r *http.Request) (*http.Response, error) {
						return nil, fmt.Errorf("odd failure at %q, %s (%s, %s)", r.URL.String(), r.URL.Redacted(), r.URL.Hostname(), r.URL.RawQuery)
					}))
				}
			},
			want: `odd failure at "https://xxxxx.invalid#72e97edf", https://xxxxx.invalid#72e97edf (xxxxx, xxxxx)`,
		},
		{
			name: "HTTP status",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("http", "8080"), plain(t, http.StatusServiceUnavailable), nil
			},
			want: "HTTP 503",
		},
		{
			name: "redirect, not followed",
			setup: func(t *testing.T) (string, string, func(*webhooks.Dispatcher)) {
				t.Helper()
				return secretURL("http", "8080"), plain(t, http.StatusFound), nil
			},
			want: "HTTP 302",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, dialTo, prepare := tt.setup(t)
			eps, err := webhooks.ParseEndpoints(raw)
			if err != nil {
				t.Fatal(err)
			}
			ep := eps[0]
			if strings.Contains(ep.Label, hostToken) || strings.Contains(raw, hostToken) && !strings.Contains(ep.Label, "xxxxx.invalid") {
				t.Fatalf("label %q", ep.Label)
			}
			pool, _ := pgtest.NewPool(t)
			var log lockedBuffer
			reg := prometheus.NewRegistry()
			d := webhooks.New(webhooks.Config{
				Endpoints: eps, Secret: secret, Events: payments.Kinds, Timeout: 500 * time.Millisecond, MaxAge: 24 * time.Hour,
				Poll: 20 * time.Millisecond, Backoff: func(int) time.Duration { return time.Hour },
			}, pool, reg, slog.New(slog.NewTextHandler(&log, nil)))
			d.Signals.Attempted.Init()
			if dialTo != "" {
				webhooks.DialAllTo(d, dialTo)
			}
			if prepare != nil {
				prepare(d)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			if err := d.Register(ctx); err != nil {
				t.Fatal(err)
			}
			go func() { defer close(done); _ = d.Run(ctx) }()
			defer func() { cancel(); <-done }()
			ev := addEvents(t, pool, 1)[0]

			a := d.Signals.Attempted.WaitUntil(t, time.Minute, func(a webhooks.Attempt) bool { return a.Seq == ev.Seq })
			want := "POST " + ep.Label + ": " + tt.want
			prefix := strings.HasSuffix(want, ": ") && strings.HasPrefix(a.Err, want)
			if a.Result != webhooks.ResultFailed || a.Err != want && !prefix {
				t.Fatalf("attempt %+v, want failed with %q", a, want)
			}
			want = a.Err
			var lastErr string
			if err := pool.QueryRow(context.Background(), `SELECT last_error FROM webhook_deliveries WHERE seq = $1`, ev.Seq).Scan(&lastErr); err != nil {
				t.Fatal(err)
			}
			st, err := webhooks.Status(context.Background(), pool, true)
			if err != nil {
				t.Fatal(err)
			}
			if lastErr != want || len(st) != 1 || st[0].LastError != want {
				t.Fatalf("last_error %q, status %+v, want %q", lastErr, st, want)
			}
			metrics, err := testutil.CollectAndFormat(reg, expfmt.TypeTextPlain)
			if err != nil {
				t.Fatal(err)
			}
			logged := log.String()
			if !strings.Contains(logged, "error="+strconv.Quote(want)) {
				t.Fatalf("no log line with the error %q:\n%s", want, logged)
			}
			for what, text := range map[string]string{"log": logged, "last_error": lastErr, "status": st[0].LastError, "metrics": string(metrics)} {
				for _, s := range []string{hostToken, userPass, token, bareKey, "moved"} {
					if strings.Contains(text, s) {
						t.Errorf("%s holds %q:\n%s", what, s, text)
					}
				}
			}
		})
	}
}

// lockedBuffer is a log's output, written by several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
