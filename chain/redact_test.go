package chain_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give, want string
	}{
		{"http://127.0.0.1:8545", "http://127.0.0.1:8545"},
		{"https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef", "https://mainnet.infura.io/v3/xxxxx"},
		{"https://eth-mainnet.g.alchemy.com/v2/AbCdEf_123-xyz", "https://eth-mainnet.g.alchemy.com/v2/xxxxx"},
		{"https://name.quiknode.pro/9f8e7d6c5b4a39281706f5e4d3c2b1a0/", "https://name.quiknode.pro/xxxxx/"},
		{"https://user:s3cret@node.example/rpc", "https://xxxxx@node.example/rpc"},
		{"https://node.example/rpc?apikey=s3cret&x=1", "https://node.example/rpc?apikey=xxxxx&x=xxxxx"},
		{"wss://node.example/ws/mainnet", "wss://node.example/ws/mainnet"},
		{"https://a1b2c3d4e5f6a7b8c9d0.eth.rpc.rivet.cloud/", "https://xxxxx.eth.rpc.rivet.cloud/"},
		{"https://eth-mainnet.public.blastapi.io", "https://eth-mainnet.public.blastapi.io"},
		// Pipedream-style ids: 15 letters and digits.
		{"https://eofyfyh52mz68hy.m.pipedream.net", "https://xxxxx.m.pipedream.net"},
		{"https://b9ac252e833b4afa399912e731d0da49.m.pipedream.net:8443/", "https://xxxxx.m.pipedream.net:8443/"},
		// Names with digits, even long ones, stay: hyphens, or too short.
		{"https://bsc-dataseed1.binance.org", "https://bsc-dataseed1.binance.org"},
		{"https://zksync2-mainnet.zksync.io", "https://zksync2-mainnet.zksync.io"},
		{"https://rpc1.node42.example", "https://rpc1.node42.example"},
		{"http://[::1]:8545", "http://[::1]:8545"},
		{"not a url", "(unparseable URL)"},
		// A bare key, the whole query or one parameter of it, with or
		// without "=": the name is the secret.
		{"https://node.example/rpc?Zx81kQ0pLmN2vB7c", "https://node.example/rpc?xxxxx"},
		{"https://node.example/rpc?Zx81kQ0pLmN2vB7c=", "https://node.example/rpc?xxxxx"},
		{"https://node.example/rpc?chain=1&Zx81kQ0pLmN2vB7c", "https://node.example/rpc?chain=xxxxx&xxxxx"},
		{"https://node.example/rpc?debug", "https://node.example/rpc?xxxxx"},
		{"wss://node.example/ws?0123456789abcdef0123456789abcdef", "wss://node.example/ws?xxxxx"},
		// Names that look like keys, or are no plain word, go with their values.
		{"https://node.example/rpc?Zx81kQ0pLmN2vB7c=1", "https://node.example/rpc?xxxxx"},
		{"https://node.example/rpc?key%2Fwith%2Fslashes=1&api_key=s3cret", "https://node.example/rpc?api_key=xxxxx&xxxxx"},
		// Names shown once, sorted, as before bare keys were hidden.
		{"https://node.example/rpc?x-api-key=s3cret&access_token=t0k", "https://node.example/rpc?access_token=xxxxx&x-api-key=xxxxx"},
		{"https://node.example/rpc?b=1&&a=2&b=3&", "https://node.example/rpc?a=xxxxx&b=xxxxx"},
		{"https://node.example/rpc?Zx81kQ0pLmN2vB7c&chain=1&0123456789abcdef0123", "https://node.example/rpc?chain=xxxxx&xxxxx"},
	}
	for _, tt := range tests {
		if got := chain.RedactURL(tt.give); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestErrorsNeverCarryTheAPIKey(t *testing.T) {
	t.Parallel()
	const (
		key     = "0123456789abcdef0123456789abcdef"
		bareKey = "Zx81kQ0pLmN2vB7c"
	)
	// Nothing listens on port 1: the dial error quotes the request URL.
	tests := []struct{ name, raw string }{
		{"http", "http://user:hunter2pass@127.0.0.1:1/v3/" + key + "?token=tok3nvalue&" + bareKey},
		{"bare key alone", "http://127.0.0.1:1/rpc?" + bareKey},
		{"websocket", "ws://user:hunter2pass@127.0.0.1:1/ws/" + key + "?" + bareKey + "&token=tok3nvalue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := chain.Dial(context.Background(), tt.raw, chain.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.ChainID(context.Background())
			if err == nil {
				t.Fatal("expected a connection error")
			}
			t.Logf("error: %v", err)
			for _, secret := range []string{key, bareKey, "hunter2pass", "tok3nvalue"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q contains secret %q", err, secret)
				}
				if strings.Contains(c.String(), secret) {
					t.Fatalf("String() = %q leaks %q", c.String(), secret)
				}
			}
			if !strings.Contains(err.Error(), "127.0.0.1:1") || !strings.Contains(c.String(), "xxxxx") {
				t.Fatalf("error %q does not name the endpoint, or %q hides nothing", err, c.String())
			}
		})
	}
}

// TestScrubbedErrorsKeepNoPartOfTheURL: whatever form an error quotes the
// URL in (whole, as Go's %q escapes it, without user info as a WebSocket
// handshake dials it, or a part alone), its secrets are gone.
func TestScrubbedErrorsKeepNoPartOfTheURL(t *testing.T) {
	t.Parallel()
	const raw = `https://us3r:pa55word@Zx81kQ0pLmN2vB7c.node.example/v3/0123456789abcdef0123/?apikey=v4lue%22q&Bare0Key0123456#frag-ment`
	tests := []string{
		`Post "` + raw + `": EOF`,
		fmt.Sprintf("Post %q: EOF", raw),
		`dial wss://Zx81kQ0pLmN2vB7c.node.example/v3/0123456789abcdef0123/?apikey=v4lue%22q&Bare0Key0123456: refused`,
		`lookup Zx81kQ0pLmN2vB7c.node.example: no such host`,
		`bad value v4lue"q for Bare0Key0123456, v4lue%22q, frag-ment, us3r, pa55word`,
	}
	for _, msg := range tests {
		got := chain.Scrub(msg, raw)
		for _, secret := range []string{"us3r", "pa55word", "Zx81kQ0pLmN2vB7c", "0123456789abcdef0123", "v4lue", "Bare0Key0123456", "frag-ment"} {
			if strings.Contains(got, secret) {
				t.Errorf("scrub(%q) = %q: holds %q", msg, got, secret)
			}
		}
	}
}

// TestTheHeadsSubscriptionLogsNoKey: the newHeads subscription's
// endpoint (RPC_WS_URL) failing to connect is logged with the URL
// redacted, a bare query key included.
func TestTheHeadsSubscriptionLogsNoKey(t *testing.T) {
	t.Parallel()
	const bareKey = "Zx81kQ0pLmN2vB7c"
	// Nothing listens on port 1.
	raw := "ws://user:hunter2pass@127.0.0.1:1/ws/0123456789abcdef0123456789abcdef?" + bareKey
	lines := make(chan string, 100)
	log := slog.New(slog.NewTextHandler(lineWriter(lines), nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		chain.WatchHeads(ctx, raw, make(chan struct{}, 1), func(bool) {}, log)
	}()
	defer func() { cancel(); <-done }()
	select {
	case line := <-lines:
		t.Log(line)
		for _, secret := range []string{bareKey, "hunter2pass", "0123456789abcdef0123456789abcdef"} {
			if strings.Contains(line, secret) {
				t.Fatalf("log line holds %q: %s", secret, line)
			}
		}
		if !strings.Contains(line, "newHeads subscription down") || !strings.Contains(line, "endpoint=ws://xxxxx@127.0.0.1:1/ws/xxxxx?xxxxx") {
			t.Fatalf("log line does not name the endpoint, redacted: %s", line)
		}
	case <-time.After(time.Minute):
		t.Fatal("no log line within a minute of a subscription to a closed port")
	}
}

// lineWriter sends each write (one log line) to lines.
type lineWriter chan<- string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}
