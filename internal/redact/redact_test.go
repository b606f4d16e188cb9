package redact_test

import (
	"testing"

	"github.com/burnpoller/burnpoller/internal/redact"
)

func TestHost(t *testing.T) {
	t.Parallel()
	tests := []struct{ give, want string }{
		{"eofyfyh52mz68hy.m.pipedream.net", "xxxxx.m.pipedream.net"},
		{"eofyfyh52mz68hy.m.pipedream.net:443", "xxxxx.m.pipedream.net:443"},
		{"0123456789abcdef0123.rpc.example:8545", "xxxxx.rpc.example:8545"},
		{"hooks.example.com:8080", "hooks.example.com:8080"},
		{"bsc-dataseed1.binance.org", "bsc-dataseed1.binance.org"},
		{"node42.example", "node42.example"},
		{"127.0.0.1:9000", "127.0.0.1:9000"},
		{"[::1]:9000", "[::1]:9000"},
	}
	for _, tt := range tests {
		if got := redact.Host(tt.give); got != tt.want {
			t.Errorf("Host(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}
