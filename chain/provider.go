package chain

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// RangeLimit is what a provider's "range too large / too many results"
// reply says about an acceptable eth_getLogs range.
type RangeLimit struct {
	// Suggested is true when the reply names a range that should work,
	// [From, To] (Infura, Alchemy, reth).
	Suggested bool
	From, To  uint64
	// MaxBlocks is the block span the reply states as the limit, or 0.
	MaxBlocks uint64
}

// rangeLimitPhrases are lowercase fragments of real providers' replies to an
// eth_getLogs over too many blocks or returning too many logs. The hint may
// be in the message or in the error's data.
var rangeLimitPhrases = []string{
	"exceed maximum block range",      // geth (-32602), BSC and PublicNode (-32000, with a colon)
	"query returned more than",        // Infura/MetaMask -32005, zkSync, Nethermind data: ... Try with this block range [0x.., 0x..]
	"log response size exceeded",      // Alchemy -32602
	"eth_getlogs requests with up to", // Alchemy and BlastAPI -32600: ... up to a 500 block range ... should work: [0x.., 0x..]
	"this block range should work",    // Alchemy
	"limited to a",                    // QuickNode -32614/-32602 (HTTP 413): limited to a 10,000 (blocks) range
	"blocks range",                    // 1rpc: eth_getLogs is limited to 0 - 50 blocks range
	"block range is too wide",         // Ankr -32600, Moonbeam: block range is too wide (maximum 1024)
	"blocks distance",                 // Cosmos EVM (Ankr TAC, Cronos, Kava): maximum [from, to] blocks distance: 10000
	"range too large",                 // Cloudflare -32047: 'fromBlock'-'toBlock' range too large. Max range: 800
	"block range too large",           // Polygon zkEVM: block range too large, max range: 10000
	"exceeds the range allowed",       // Blast data: the range A - B exceeds the range allowed for your plan (49999 > 2000)
	"blocks are not supported",        // dRPC code 35: ranges over 10000 blocks are not supported on free plan
	"block range limit",               // Chainstack -32602: Block range limit exceeded
	"exceeds limit of",                // Infura -32602: range 1000000 exceeds limit of 10000; Arbitrum: logs matched by query exceeds limit of 10000
	"exceeds max block range",         // reth -32602: query exceeds max block range 5000
	"exceeds max results",             // reth -32602: query exceeds max results 20000, retry with the range X-Y
	"max logs per response",           // reth flag, Nethermind: Max logs per response is N
	"too many logs",                   // Nethermind -32005: Too many logs requested; Erigon: query returns too many logs
	"too many results",                // generic
	"too many blocks",                 // Avalanche: requested too many blocks from X to Y, maximum is set to 2048
	"exceeds range",                   // Celo -32602: query exceeds range, retry smaller (max block range 5000, got N)
	"block range greater than",        // Mantle -32602: block range greater than 10000 max
	"bigger than range limit",         // Tenderly, thirdweb data: range 9009594 is bigger than range limit 2000
	"exceeds server limit",            // Erigon: query block range exceeds server limit, narrow your filter: N
	"exceeds the maximum of",          // Nethermind -32602: Block range N exceeds the maximum of M blocks per logs request
	"maximum rpc range limit",         // Besu -32005: Requested range exceeds maximum RPC range limit
	"response size exceeded",          // generic
}

var (
	// [0x1, 0x2] in Infura's, Alchemy's and Nethermind's suggestions.
	suggestedHex = regexp.MustCompile(`\[\s*(0x[0-9a-fA-F]+)\s*,\s*(0x[0-9a-fA-F]+)\s*\]`)
	// reth: "retry with the range 100-200" (decimal).
	suggestedDec = regexp.MustCompile(`(?i)retry with the range\s+(\d+)\s*-\s*(\d+)`)
	// A stated block span, most specific first.
	statedSpan = []*regexp.Regexp{
		regexp.MustCompile(`(?i)exceed maximum block range:?\s*([\d,_]+)`),
		regexp.MustCompile(`(?i)max(?:imum)? block range:?\s*([\d,_]+k?)\b`),
		regexp.MustCompile(`(?i)limited to (?:a |an )?([\d,_]+k?)[\s-]*(?:blocks? )?range`),
		regexp.MustCompile(`(?i)up to (?:a |an )?([\d,_]+k?)[\s-]*blocks? range`),
		regexp.MustCompile(`(?i)blocks distance:?\s*([\d,_]+)`),
		regexp.MustCompile(`(?i)max range:?\s*([\d,_]+)`),
		regexp.MustCompile(`(?i)\(\s*\d+\s*>\s*([\d,_]+)\s*\)`),
		regexp.MustCompile(`(?i)ranges over ([\d,_]+) blocks`),
		regexp.MustCompile(`(?i)range [\d,_]+ exceeds limit of\s*([\d,_]+)`),
		regexp.MustCompile(`(?i)\(maximum ([\d,_]+)\)`),
		regexp.MustCompile(`(?i)maximum is set to ([\d,_]+)`),
		regexp.MustCompile(`(?i)block range greater than ([\d,_]+)`),
		regexp.MustCompile(`(?i)bigger than range limit ([\d,_]+)`),
		regexp.MustCompile(`(?i)exceeds server limit, narrow your filter:?\s*([\d,_]+)`),
		regexp.MustCompile(`(?i)exceeds the maximum of ([\d,_]+) blocks`),
	}
)

// ParseRangeLimit recognises a range-limit reply from a JSON-RPC error's
// code, message and data, and reads any suggested range or stated limit.
func ParseRangeLimit(code int, message string, data any) (RangeLimit, bool) {
	var l RangeLimit
	ok := isRangeLimit(message, data, &l)
	return l, ok
}

func isRangeLimit(message string, data any, l *RangeLimit) bool {
	// The hint may be in the data alone, under a generic message.
	text := message
	if d := dataText(data); d != "" {
		text += " " + d
	}
	lower := strings.ToLower(text)
	if !containsAny(lower, rangeLimitPhrases...) {
		return false
	}
	// A rate limit that mentions "limit" is not a range limit.
	if containsAny(lower, "rate limit", "too many requests", "request rate", "per second", "/sec", "per minute",
		"daily", "quota", "compute units", "credits") {
		return false
	}
	*l = RangeLimit{}
	if m := suggestedHex.FindStringSubmatch(text); m != nil {
		from, err1 := hexutil.DecodeUint64(strings.ToLower(m[1]))
		to, err2 := hexutil.DecodeUint64(strings.ToLower(m[2]))
		if err1 == nil && err2 == nil && from <= to {
			l.Suggested, l.From, l.To = true, from, to
		}
	} else if m := suggestedDec.FindStringSubmatch(text); m != nil {
		from, err1 := strconv.ParseUint(m[1], 10, 64)
		to, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 == nil && err2 == nil && from <= to {
			l.Suggested, l.From, l.To = true, from, to
		}
	}
	if !l.Suggested {
		if from, to, ok := dataRange(data); ok {
			l.Suggested, l.From, l.To = true, from, to
		}
	}
	for _, re := range statedSpan {
		if m := re.FindStringSubmatch(text); m != nil {
			if n, ok := parseSpan(m[1]); ok {
				l.MaxBlocks = n
				break
			}
		}
	}
	return true
}

// dataText flattens an error's data (a string, or an object of strings, as
// Nethermind, Tenderly and Blast send) for matching.
func dataText(data any) string {
	switch d := data.(type) {
	case string:
		return d
	case map[string]any:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(d)) {
			if s, ok := d[k].(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// dataRange reads {"from": "0x..", "to": "0x.."} from an error's data (Infura).
func dataRange(data any) (from, to uint64, ok bool) {
	m, isMap := data.(map[string]any)
	if !isMap {
		return 0, 0, false
	}
	f, fok := m["from"].(string)
	t, tok := m["to"].(string)
	if !fok || !tok {
		return 0, 0, false
	}
	from, err1 := hexutil.DecodeUint64(strings.ToLower(f))
	to, err2 := hexutil.DecodeUint64(strings.ToLower(t))
	if err1 != nil || err2 != nil || from > to {
		return 0, 0, false
	}
	return from, to, true
}

// parseSpan reads "10,000", "2K" or "1000" as a block count.
func parseSpan(s string) (uint64, bool) {
	s = strings.NewReplacer(",", "", "_", "").Replace(strings.ToLower(s))
	mult := uint64(1)
	if strings.HasSuffix(s, "k") {
		mult, s = 1000, strings.TrimSuffix(s, "k")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n > 1<<40 {
		return 0, false
	}
	return n * mult, true
}
