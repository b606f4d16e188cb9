package chain_test

import (
	"context"
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
	}
	for _, tt := range tests {
		if got := chain.RedactURL(tt.give); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestErrorsNeverCarryTheAPIKey(t *testing.T) {
	t.Parallel()
	const key = "0123456789abcdef0123456789abcdef"
	// Nothing listens on port 1: the dial error quotes the request URL.
	raw := "http://user:hunter2pass@127.0.0.1:1/v3/" + key + "?token=tok3nvalue"
	c, err := chain.Dial(context.Background(), raw, chain.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ChainID(context.Background())
	if err == nil {
		t.Fatal("expected a connection error")
	}
	t.Logf("error: %v", err)
	for _, secret := range []string{key, "hunter2pass", "tok3nvalue"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q contains secret %q", err, secret)
		}
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error %q does not name the endpoint", err)
	}
	if s := c.String(); strings.Contains(s, key) {
		t.Fatalf("String() = %q leaks the key", s)
	}
}
