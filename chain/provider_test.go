package chain_test

import (
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
)

// Real replies, as providers and clients send them.
func TestParseRangeLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		code    int
		message string
		data    any
		want    chain.RangeLimit
	}{
		{"geth", -32602, "exceed maximum block range 1000", nil, chain.RangeLimit{MaxBlocks: 1000}},
		{"BSC/PublicNode", -32000, "exceed maximum block range: 50000", nil, chain.RangeLimit{MaxBlocks: 50000}},
		{"Infura with suggestion", -32005, "query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].",
			map[string]any{"from": "0xBDE5F8", "limit": float64(10000), "to": "0x102DBCC"},
			chain.RangeLimit{Suggested: true, From: 0xBDE5F8, To: 0x102DBCC}},
		{"Infura bare", -32005, "query returned more than 10000 results", nil, chain.RangeLimit{}},
		{"Infura block cap", -32602, "range 1000000 exceeds limit of 10000", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Alchemy size", -32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0x0, 0xd043b8]",
			nil, chain.RangeLimit{Suggested: true, From: 0, To: 0xd043b8, MaxBlocks: 2000}},
		{"Alchemy block cap", -32600, "You can make eth_getLogs requests with up to a 500 block range. Based on your parameters, this block range should work: [0x7e9b85, 0x7e9d78]",
			nil, chain.RangeLimit{Suggested: true, From: 0x7e9b85, To: 0x7e9d78, MaxBlocks: 500}},
		{"Alchemy free tier", -32600, "Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [0x3aab3f5, 0x3aab3fe]. Upgrade to PAYG for expanded block range.",
			nil, chain.RangeLimit{Suggested: true, From: 0x3aab3f5, To: 0x3aab3fe, MaxBlocks: 10}},
		{"QuickNode blocks range", -32602, "eth_getLogs and eth_newFilter are limited to a 10,000 blocks range", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"QuickNode range", -32614, "eth_getLogs is limited to a 10,000 range", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"generic too large", -32000, "block range too large", nil, chain.RangeLimit{}},
		{"Polygon zkEVM", -32000, "block range too large, max range: 10000", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Ankr", -32600, "block range is too wide", nil, chain.RangeLimit{}},
		{"Moonbeam", -32603, "block range is too wide (maximum 1024)", nil, chain.RangeLimit{MaxBlocks: 1024}},
		{"Cosmos EVM", -32000, "maximum [from, to] blocks distance: 10000", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Cloudflare", -32047, "Invalid eth_getLogs request. 'fromBlock'-'toBlock' range too large. Max range: 800", nil, chain.RangeLimit{MaxBlocks: 800}},
		{"dRPC", 35, "ranges over 10000 blocks are not supported on free plan", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Chainstack", -32602, "Block range limit exceeded. See more details at https://docs.chainstack.com/docs/limits#evm-range-limits", nil, chain.RangeLimit{}},
		{"reth results", -32602, "query exceeds max results 20000, retry with the range 100-250", nil, chain.RangeLimit{Suggested: true, From: 100, To: 250}},
		{"reth blocks", -32602, "query exceeds max block range 5000", nil, chain.RangeLimit{MaxBlocks: 5000}},
		{"Arbitrum", -32000, "logs matched by query exceeds limit of 10000", nil, chain.RangeLimit{}},
		{"Avalanche", -32000, "requested too many blocks from 100 to 9000, maximum is set to 2048", nil, chain.RangeLimit{MaxBlocks: 2048}},
		{"Celo", -32602, "query exceeds range, retry smaller (max block range 5000, got 9000)", nil, chain.RangeLimit{MaxBlocks: 5000}},
		{"Mantle", -32602, "block range greater than 10000 max", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Erigon", -32602, "query block range exceeds server limit, narrow your filter: 1000", nil, chain.RangeLimit{MaxBlocks: 1000}},
		{"Erigon logs", -32602, "query returns too many logs, narrow your filter: 10000", nil, chain.RangeLimit{}},
		{"Nethermind blocks", -32602, "Block range 20000 exceeds the maximum of 10000 blocks per logs request. Use a narrower fromBlock/toBlock range or increase Receipt.MaxBlockDepth.", nil, chain.RangeLimit{MaxBlocks: 10000}},
		{"Nethermind logs", -32005, "Too many logs requested. Max logs per response is 1.", nil, chain.RangeLimit{}},
		{"Nethermind hint in data", -32602, "invalid params", "Query returned more than 50000 results. Try with this block range [0x1000000, 0x1080000].",
			chain.RangeLimit{Suggested: true, From: 0x1000000, To: 0x1080000}},
		{"Blast data object", -32602, "Invalid params", map[string]any{"range": "the range 55074203 - 55124202 exceeds the range allowed for your plan (49999 > 2000)."},
			chain.RangeLimit{MaxBlocks: 2000}},
		{"Tenderly data payload", -32602, "invalid params", map[string]any{"error_id": "x", "payload": "range 9009594 is bigger than range limit 2000"},
			chain.RangeLimit{MaxBlocks: 2000}},
		{"Besu", -32005, "Requested range exceeds maximum RPC range limit", nil, chain.RangeLimit{}},
		{"max logs per response", -32602, "query exceeds max logs per response (10000)", nil, chain.RangeLimit{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := chain.ParseRangeLimit(tt.code, tt.message, tt.data)
			if !ok {
				t.Fatalf("not recognised as a range limit: %q", tt.message)
			}
			if got != tt.want {
				t.Fatalf("ParseRangeLimit = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseRangeLimitLeavesOtherErrorsAlone(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{
		"project ID request rate exceeded",
		"daily request count exceeded, request rate limited",
		"Your app has exceeded its compute units per second capacity.",
		"100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com",
		"credits limited to 6000/sec",
		"limit exceeded",
		"header not found",
		"missing trie node",
		"Must be authenticated!",
		"execution reverted",
	} {
		if l, ok := chain.ParseRangeLimit(-32005, msg, nil); ok {
			t.Errorf("%q taken for a range limit: %+v", msg, l)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		{"5", 5 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"Sun, 22 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sun, 22 Nov 2026 11:00:00 GMT", 0, true},
		{"86400", 5 * time.Minute, true},
		{"", 0, false},
		{"-1", 0, false},
		{"soon", 0, false},
		{"NaN", 0, false},
	}
	for _, tt := range tests {
		got, ok := chain.ParseRetryAfter(tt.give, now)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}
