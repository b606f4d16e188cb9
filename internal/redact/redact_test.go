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

func TestKeyLike(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give string
		want bool
	}{
		{"Zx81kQ0pLmN2vB7c", true},
		{"eofyfyh52mz68hy", true},
		{"0123456789abcdef0123", true},
		{"api_key", false},
		{"application_name", false},
		{"bsc-dataseed1", false},
		{"node42", false},
		{"0123456789012345", false}, // digits only: a number
		{"abcdefghijklmnopqrst", false},
	}
	for _, tt := range tests {
		if got := redact.KeyLike(tt.give); got != tt.want {
			t.Errorf("KeyLike(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
	if got := redact.HiddenHostLabels("eofyfyh52mz68hy.m.pipedream.net:443"); len(got) != 1 || got[0] != "eofyfyh52mz68hy" {
		t.Errorf("HiddenHostLabels = %q, want the token", got)
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	const url = `https://host.example/in/TOKEN1234?q="v"`
	tests := []struct{ give, want string }{
		// The whole URL first, then its parts; what was put in stays.
		{`Post "` + url + `": EOF`, `Post "LABEL": EOF`},
		{`Post "https://host.example/in/TOKEN1234?q=\"v\"": EOF`, `Post "LABEL": EOF`},
		{`token TOKEN1234 and host.example`, `token xxxxx and xxxxx`},
		{`abc`, `abc`},
	}
	for _, tt := range tests {
		got := redact.Scrub(tt.give, "LABEL", []string{url}, []string{"TOKEN1234", "host.example", "abc"})
		if got != tt.want {
			t.Errorf("Scrub(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
	// The label holds a part: it is not scrubbed again.
	if got := redact.Scrub("x "+url, "https://host.example#1", []string{url}, []string{"host.example"}); got != "x https://host.example#1" {
		t.Errorf("Scrub scrubbed its own label: %q", got)
	}
}
