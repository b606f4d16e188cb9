package chain

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
)

// logsReply is an eth_getLogs batch reply as geth writes it, with logs of
// the blocks given, one log per entry, in order.
func logsReply(blocks ...uint64) string {
	var b strings.Builder
	b.WriteString(`[{"jsonrpc":"2.0","id":1,"result":[`)
	for i, n := range blocks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"0x00000000000000000000000000000000000000b1","topics":[],"data":"0x",`+
			`"blockNumber":"%#x","transactionHash":"0x01","logIndex":"%#x","removed":false}`, n, i)
	}
	b.WriteString(`]},{"jsonrpc":"2.0","id":2,"result":{"number":"0x10","hash":"0x02"}}]`)
	return b.String()
}

func TestLogScan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want cutReply
	}{
		{"no logs", logsReply(), cutReply{}},
		{"one block", logsReply(7, 7, 7), cutReply{first: 7, seen: true}},
		{"blocks read whole before the last", logsReply(5, 5, 6, 9, 9, 9, 12), cutReply{first: 5, blocks: 7, logs: 6, seen: true}},
		{"large block numbers", logsReply(0xfffffff0, 0xfffffff1), cutReply{first: 0xfffffff0, blocks: 1, logs: 1, seen: true}},
		{"cut inside a number", logsReply(3, 4, 0x1234)[:strings.Index(logsReply(3, 4, 0x1234), "0x1234")+4],
			cutReply{first: 3, blocks: 1, logs: 1, seen: true}},
		{"spaces are not nodes' format: not counted", `[{"result":[{"blockNumber": "0x5"}]}]`, cutReply{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Every chunk size: a field may be split anywhere.
			for size := 1; size <= len(tt.give); size++ {
				s := &logScan{}
				for at := 0; at < len(tt.give); at += size {
					s.feed([]byte(tt.give[at:min(at+size, len(tt.give))]))
				}
				if got := s.reached(); got != tt.want {
					t.Fatalf("chunks of %d bytes: reached %+v, want %+v", size, got, tt.want)
				}
			}
		})
	}
}

func TestSizeAfterTooLarge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		span uint64
		from uint64
		cut  cutReply
		want uint64
	}{
		{"not scanned: a quarter", 400, 0, cutReply{}, 100},
		{"not scanned, tiny span", 2, 0, cutReply{}, 1},
		{"dense from the start: target logs at that density", 274, 100,
			cutReply{first: 100, blocks: 30, logs: 12000, seen: true}, 5},
		{"target beyond the cap: the blocks read whole", 400, 0,
			cutReply{first: 0, blocks: 34, logs: 340, seen: true}, 34},
		{"empty blocks first: through them, then the target's worth", 1024, 144,
			cutReply{first: 300, blocks: 6, logs: 300, seen: true}, 156 + 6},
		{"cap inside the first block with logs: up to it", 1024, 144,
			cutReply{first: 150, seen: true}, 7},
		{"cap inside the first block: one block", 16, 10, cutReply{first: 10, seen: true}, 1},
		{"never the span again", 20, 0, cutReply{first: 19, blocks: 0, seen: true}, 19},
		{"first log before from (inconsistent): a quarter", 400, 100, cutReply{first: 50, blocks: 5, logs: 500, seen: true}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sizeAfterTooLarge(tt.span, tt.from, tt.cut, 2000); got != tt.want {
				t.Errorf("sizeAfterTooLarge(%d, %d, %+v) = %d, want %d", tt.span, tt.from, tt.cut, got, tt.want)
			}
		})
	}
}

func TestDensitySpan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to uint64
		firstLog uint64
		logs     int
		want     uint64
	}{
		{"no logs: the whole range", 10, 19, 0, 0, 10},
		{"logs from the start", 10, 19, 10, 500, 10},
		{"logs from the middle", 10, 19, 16, 500, 4},
		{"logs in the last block", 10, 19, 19, 5, 1},
		{"first log outside the range: the whole range", 10, 19, 3, 5, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := densitySpan(tt.from, tt.to, tt.firstLog, tt.logs); got != tt.want {
				t.Errorf("densitySpan(%d, %d, %d, %d) = %d, want %d", tt.from, tt.to, tt.firstLog, tt.logs, got, tt.want)
			}
		})
	}
}

func TestHintedDensity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		blocks uint64
		logs   int
		want   uint64
	}{
		{"dense ledger", 256, 25600, 20},
		{"very dense: one block", 256, 1_000_000, 1},
		{"sparse ledger: MaxRange", 256, 10, 2000},
		{"just under MaxRange", 256, 257, 1992},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := hintedDensity(tt.blocks, tt.logs, 2000, 2000); got != tt.want {
				t.Errorf("hintedDensity(%d, %d) = %d, want %d", tt.blocks, tt.logs, got, tt.want)
			}
		})
	}
}

func TestReceiptBatchLen(t *testing.T) {
	t.Parallel()
	blocks := func(ns ...uint64) []Header {
		var out []Header
		for _, n := range ns {
			out = append(out, Header{Number: n})
		}
		return out
	}
	logs := func(counts map[uint64]int) map[uint64][]types.Log {
		out := map[uint64][]types.Log{}
		for n, c := range counts {
			out[n] = make([]types.Log, c)
		}
		return out
	}
	tests := []struct {
		name   string
		blocks []Header
		logs   map[uint64][]types.Log
		size   int
		want   int
	}{
		{"sparse: the batch size", blocks(1, 2, 3, 4, 5), logs(map[uint64]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1}), 3, 3},
		{"dense: up to a thousand logs", blocks(1, 2, 3), logs(map[uint64]int{1: 400, 2: 400, 3: 400}), 32, 2},
		{"one block over a thousand: alone", blocks(1, 2), logs(map[uint64]int{1: 5000, 2: 1}), 32, 1},
		{"exactly a thousand", blocks(1, 2, 3), logs(map[uint64]int{1: 500, 2: 500, 3: 1}), 32, 2},
		{"blocks chosen by bloom count no logs", blocks(1, 2, 3), logs(map[uint64]int{}), 32, 3},
		{"fewer blocks than the size", blocks(7), logs(map[uint64]int{7: 3}), 32, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := receiptBatchLen(tt.blocks, tt.logs, tt.size); got != tt.want {
				t.Errorf("receiptBatchLen = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNodeTransport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host         string
		uncompressed bool
	}{
		{"127.0.0.1", true},
		{"127.3.4.5", true},
		{"::1", true},
		{"localhost", true},
		{"LocalHost", true},
		{"10.0.0.7", false},
		{"geth", false},
		{"eth-mainnet.g.alchemy.com", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			tr := nodeTransport(tt.host)
			if tr.DisableCompression != tt.uncompressed {
				t.Errorf("%q: DisableCompression = %v, want %v", tt.host, tr.DisableCompression, tt.uncompressed)
			}
			if tr.MaxIdleConnsPerHost != idleConnsPerNode {
				t.Errorf("%q: MaxIdleConnsPerHost = %d, want %d", tt.host, tr.MaxIdleConnsPerHost, idleConnsPerNode)
			}
		})
	}
}
