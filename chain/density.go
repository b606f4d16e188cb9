package chain

import (
	"bytes"
	"context"
	"sync"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// logScan watches an eth_getLogs reply as it is read and counts its logs by
// block, so that a reply cut off at the response cap still tells how dense
// the blocks it reached are: the next range is sized from what the node
// already sent rather than guessed, and one reply over the cap is the only
// one (see sizeAfterTooLarge). Logs come in chain order; the block being
// read when the reply was cut may be incomplete and is not counted.
type logScan struct {
	mu    sync.Mutex
	carry []byte // the end of the last chunk, which may hold a split field
	first uint64 // block of the first log seen
	last  uint64 // block of the last log seen
	seen  bool
	// whole is the logs of the blocks before last: blocks read whole.
	whole  int
	inLast int
}

// blockNumberField is what precedes each log's block number in a reply.
// Nodes write it without spaces (geth, anvil, reth, Erigon, Nethermind).
var blockNumberField = []byte(`"blockNumber":"0x`)

// maxCarry is the most bytes kept between chunks: the field and a block
// number of up to 16 hex digits and its closing quote.
const maxCarry = 17 + 16 + 1

type logScanKey struct{}

// withLogScan returns ctx carrying s: the HTTP transport feeds it the reply
// of the request made under ctx.
func withLogScan(ctx context.Context, s *logScan) context.Context {
	return context.WithValue(ctx, logScanKey{}, s)
}

func logScanOf(ctx context.Context) *logScan {
	s, _ := ctx.Value(logScanKey{}).(*logScan)
	return s
}

// feed scans the next chunk of the reply.
func (s *logScan) feed(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from := 0
	if len(s.carry) > 0 {
		// A field split between the chunks starts in the carry; one that
		// starts in p is found in p itself.
		joint := append(s.carry, p[:min(len(p), maxCarry)]...)
		if end := s.scan(joint, len(s.carry)); end > len(s.carry) {
			from = end - len(s.carry)
		}
	}
	end := from + s.scan(p[from:], len(p)-from)
	if end == 0 {
		// Nothing counted: what is left of the carry may still begin a
		// field that p goes on with.
		if len(p) >= maxCarry {
			s.carry = append(s.carry[:0], p[len(p)-maxCarry:]...)
			return
		}
		keep := s.carry[max(0, len(s.carry)+len(p)-maxCarry):]
		s.carry = append(append([]byte(nil), keep...), p...)
		return
	}
	s.carry = append(s.carry[:0], p[max(end, len(p)-maxCarry):]...)
}

// scan counts the block numbers of the fields in b that start before
// startBefore and returns where the last one counted ends (0 if none).
func (s *logScan) scan(b []byte, startBefore int) int {
	end := 0
	for {
		i := bytes.Index(b[end:], blockNumberField)
		if i < 0 || end+i >= startBefore {
			return end
		}
		start := end + i + len(blockNumberField)
		q := bytes.IndexByte(b[start:], '"')
		if q < 0 {
			return end // the number goes on in the next chunk
		}
		var n hexutil.Uint64 // the number with its 0x, read in place
		if n.UnmarshalText(b[start-2:start+q]) == nil {
			s.add(uint64(n))
		}
		end = start + q + 1
	}
}

func (s *logScan) add(n uint64) {
	switch {
	case !s.seen:
		s.first, s.last, s.seen, s.inLast = n, n, true, 1
	case n == s.last:
		s.inLast++
	case n > s.last:
		s.whole += s.inLast
		s.last, s.inLast = n, 1
	}
}

// reached returns what the scan saw: the block of the first log, the logs
// of the blocks read whole (first to last-1), how many blocks that is, and
// whether any log was seen.
func (s *logScan) reached() cutReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cutReply{first: s.first, blocks: s.last - s.first, logs: s.whole, seen: s.seen}
}
