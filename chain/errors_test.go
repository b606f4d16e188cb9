package chain_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
)

// TestClassify sends a real request to a server replying as providers do
// and checks the class and Retry-After the client derives.
func TestClassify(t *testing.T) {
	t.Parallel()
	rpcErr := func(code int, msg string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":%q}}`, code, msg)
	}
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		want       chain.Class
		retryAfter time.Duration
	}{
		{"HTTP 429 with Retry-After", 429, map[string]string{"Retry-After": "7"}, `{"code":429,"message":"Too Many Requests"}`, chain.ClassThrottled, 7 * time.Second},
		{"HTTP 503", 503, nil, "upstream unavailable", chain.ClassThrottled, 0},
		{"HTTP 500", 500, nil, "oops", chain.ClassTransient, 0},
		{"HTTP 502", 502, nil, "bad gateway", chain.ClassTransient, 0},
		{"HTTP 401", 401, nil, "Must be authenticated!", chain.ClassPermanent, 0},
		{"HTTP 403 Infura", 403, nil, rpcErr(-32002, "rejected due to project ID settings"), chain.ClassPermanent, 0},
		{"HTTP 402 Infura credits", 402, nil, `{"code":402,"event":-33000,"message":"Payment Required"}`, chain.ClassPermanent, 0},
		{"HTTP 413 QuickNode range", 413, nil, rpcErr(-32614, "eth_getLogs is limited to a 10,000 range"), chain.ClassRangeLimit, 0},
		{"HTTP 400 Alchemy free tier range", 400, nil, rpcErr(-32600, "Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [0x1, 0xa]."), chain.ClassRangeLimit, 0},
		{"Infura rate limit with backoff data", 200, nil, `{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"project ID request rate exceeded","data":{"rate":{"allowed_rps":1,"backoff_seconds":30,"current_rps":1.1}}}}`, chain.ClassThrottled, 30 * time.Second},
		{"-32005 limit exceeded", 200, nil, rpcErr(-32005, "limit exceeded"), chain.ClassThrottled, 0},
		{"QuickNode -32007", 200, nil, rpcErr(-32007, "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"), chain.ClassThrottled, 0},
		{"Alchemy code 429 in body", 200, nil, rpcErr(429, "Your app has exceeded its compute units per second capacity."), chain.ClassThrottled, 0},
		{"geth range", 200, nil, rpcErr(-32602, "exceed maximum block range 100"), chain.ClassRangeLimit, 0},
		{"invalid params", 200, nil, rpcErr(-32602, "invalid argument 0: hex string without 0x prefix"), chain.ClassPermanent, 0},
		{"geth, a range past its head", 200, nil, rpcErr(-32602, "block range extends beyond current head block"), chain.ClassTransient, 0},
		{"method not found", 200, nil, rpcErr(-32601, "the method eth_chainId does not exist/is not available"), chain.ClassPermanent, 0},
		{"Ankr unauthorized", 200, nil, rpcErr(-32000, "Unauthorized: You must authenticate your request with an API key."), chain.ClassPermanent, 0},
		{"header not found", 200, nil, rpcErr(-32000, "header not found"), chain.ClassTransient, 0},
		{"resource not found", 200, nil, rpcErr(-32001, "resource not found"), chain.ClassTransient, 0},
		{"-32001 busy", 200, nil, rpcErr(-32001, "server is busy, please try again later"), chain.ClassThrottled, 0},
		{"HTTP 429 whose body reads like a range limit", 429, map[string]string{"Retry-After": "3"}, rpcErr(-32005, "query returned more than 10000 results"), chain.ClassThrottled, 3 * time.Second},
		{"HTTP 400 with a transient JSON-RPC error", 400, nil, rpcErr(-32000, "header not found"), chain.ClassTransient, 0},
		{"HTTP 400 with a rate-limit JSON-RPC error", 400, nil, rpcErr(-32005, "daily request count exceeded, request rate limited"), chain.ClassThrottled, 0},
		{"HTTP 404 plain", 404, nil, "not found", chain.ClassPermanent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			c, err := chain.Dial(context.Background(), srv.URL, chain.Options{Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.ChainID(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			var e *chain.Error
			if !errors.As(err, &e) {
				t.Fatalf("%T is not a *chain.Error: %v", err, err)
			}
			if got := chain.ClassOf(err); got != tt.want {
				t.Fatalf("class = %s, want %s (%v)", got, tt.want, err)
			}
			if got := chain.RetryAfterOf(err); got != tt.retryAfter {
				t.Fatalf("retry after = %v, want %v", got, tt.retryAfter)
			}
		})
	}
}

// TestConnectionResetIsTransient: a node (or the load balancer before it)
// that resets the connection is retried with back-off.
func TestConnectionResetIsTransient(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			// Read the request, then close with SO_LINGER 0: a TCP RST.
			_, _ = conn.Read(make([]byte, 4096))
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	}()
	c, err := chain.Dial(context.Background(), "http://"+l.Addr().String(), chain.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ChainID(context.Background())
	if err == nil {
		t.Fatal("no error from a reset connection")
	}
	if !strings.Contains(err.Error(), "reset") && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("not a reset: %v", err)
	}
	if got := chain.ClassOf(err); got != chain.ClassTransient {
		t.Fatalf("class = %s, want transient (%v)", got, err)
	}
}

// TestTimeoutIsTransient: a node that never answers is cut off by the
// request timeout, and that is a transient failure of the node. The node
// holds the request until the client hangs up, so the call can only return
// because a timeout fired. The guard is 50 times the 100 ms timeout, so it
// does not time the call, yet half Dial's default of 10 s: a client that
// ignored Options.Timeout would still fail.
func TestTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	hungUp, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// With the body read, the server watches the connection and ends
		// r's context when the client hangs up.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			select {
			case hungUp <- struct{}{}:
			default:
			}
		case <-release: // the test is over
		}
	}))
	defer srv.Close()
	defer close(release)
	c, err := chain.Dial(context.Background(), srv.URL, chain.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := c.ChainID(context.Background())
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-time.After(5 * time.Second):
		t.Fatal("ChainID still waiting 5s into a 100ms request timeout")
	}
	var e *chain.Error
	if !errors.As(err, &e) || e.Class != chain.ClassTransient || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ChainID = %v (class %s), want a transient *chain.Error wrapping the request's deadline", err, chain.ClassOf(err))
	}
	select {
	case <-hungUp:
	case <-time.After(time.Minute):
		t.Fatal("the client returned but never hung up on the node")
	}
}

// TestHugeReplyShrinksTheRange: a reply past MaxResponseBytes is cut off and
// classed as a range limit, not read whole.
func TestHugeReplyShrinksTheRange(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":"0x`)
		chunk := make([]byte, 1<<20)
		for i := range chunk {
			chunk[i] = 'a'
		}
		for range chain.MaxResponseBytes/len(chunk) + 2 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}`)
	}))
	defer srv.Close()
	c, err := chain.Dial(context.Background(), srv.URL, chain.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ChainID(context.Background())
	if chain.ClassOf(err) != chain.ClassRangeLimit {
		t.Fatalf("class = %s (%v), want range_limit", chain.ClassOf(err), err)
	}
}
