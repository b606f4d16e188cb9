package chain

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
)

// The reply reader's bounds.
const (
	// readerBuffer is the size of the buffer a streamed reply is read
	// through: a dense reply's logs go through it a few at a time.
	readerBuffer = 32 << 10
	// maxNesting is how deeply a reply may nest, counted from its top, as
	// encoding/json and jsontext count it.
	maxNesting = 10000
	// maxKey is the longest key, decoded, that is compared with the names
	// a reader wants: longer, it can equal none of them (each is at most
	// 16 letters, and a letter is at most four bytes).
	maxKey = 64
)

// readerBuffers are the buffers of streamed replies, reused.
var readerBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, readerBuffer)
	return &b
}}

// replyReader reads a node's reply, JSON, in one pass: from a stream,
// through a buffer of its own (readerBuffer), or from chunks held in
// memory, read in place. It holds only what the value being read needs:
// a token it keeps (a hash, a key, a quantity) within the buffer or, when
// the token outgrows it, in the buffers it filled (spill); what it skips
// (a value of no use, however long or deep) not at all. It checks that
// what it reads is JSON, as leniently as encoding/json (a key given twice,
// or a string that is not UTF-8, is no error in itself), and nests no
// deeper than maxNesting. Decoding into values (logs, receipts, headers)
// and the reply's envelope are built on it (fastdecode.go, httpbatch.go,
// replyerror.go), so that no reply, whatever its shape, makes the client
// allocate more than four times its size (docs/operations/security.md).
type replyReader struct {
	src    io.Reader // nil: the input is chunks
	chunks [][]byte  // the input not yet in buf, when it is held in memory
	buf    []byte    // buf[i:] is read and not yet consumed
	i      int
	off    int64 // bytes before buf[0]
	err    error // why the input ended (io.EOF at its end)
	pooled *[]byte

	// keep is where the token being kept starts in buf, or -1; spill
	// holds its bytes before buf (kept bytes in all); past keepMax bytes
	// (when not negative) it is no longer kept.
	keep    int
	spill   [][]byte
	kept    int
	keepMax int

	depth  int // containers open at the reader's position
	keyBuf [maxKey + utf8.UTFMax]byte
	// hashBlock and dataBlock are what decoded topics and data are cut
	// from: a reply's logs share a few blocks.
	hashBlock []common.Hash
	dataBlock []byte
	// hashGen and dataGen count the blocks begun (mark, reclaim).
	hashGen, dataGen int
	// quiet makes every syntax error errNotJSON itself: a reader that only
	// looks for something (a WebSocket message's id) drops its errors, and
	// formatting one for each of a node's malformed messages, however tiny,
	// would cost more than the message.
	quiet bool
}

// newStreamReader reads a reply from r.
func newStreamReader(r io.Reader) *replyReader {
	p := readerBuffers.Get().(*[]byte)
	return &replyReader{src: r, buf: (*p)[:0], pooled: p, keep: -1}
}

// newBytesReader reads a reply held in memory as chunks, one after
// another, in place: the chunks must not change while it reads.
func newBytesReader(chunks ...[]byte) *replyReader {
	return &replyReader{chunks: chunks, keep: -1}
}

// release gives the reader's buffer back for reuse: nothing read from it
// may be used after.
func (d *replyReader) release() {
	if d.pooled != nil {
		*d.pooled = d.buf[:0]
		readerBuffers.Put(d.pooled)
	}
	d.pooled, d.buf, d.spill = nil, nil, nil
}

// errNotJSON marks a reply that is not JSON: it fails whole.
var errNotJSON = errors.New("reply is not JSON")

// syntax is the error of a reply that is not JSON where the reader is: an
// unexpected byte, or the end of the input (with the error that ended
// it, if not io.EOF).
func (d *replyReader) syntax(what string) error {
	if d.quiet {
		return errNotJSON
	}
	at := d.off + int64(d.i)
	if d.i >= len(d.buf) {
		if d.err != nil && !errors.Is(d.err, io.EOF) {
			return fmt.Errorf("reading the reply at byte %d: %w", at, d.err)
		}
		return fmt.Errorf("%w: %w in %s at byte %d", errNotJSON, io.ErrUnexpectedEOF, what, at)
	}
	return fmt.Errorf("%w: invalid character %q in %s at byte %d", errNotJSON, d.buf[d.i], what, at)
}

// fill reads more of the input into buf, at least one byte, keeping
// buf[i:] and the token being kept; false at the end of the input.
func (d *replyReader) fill() bool {
	if d.err != nil {
		return false
	}
	if d.keep >= 0 && d.keepMax >= 0 && d.kept+d.i-d.keep > d.keepMax {
		d.dropKept()
	}
	if d.src == nil {
		return d.nextChunk()
	}
	start := d.i
	if d.keep >= 0 {
		start = d.keep
	}
	switch {
	case start == 0 && len(d.buf) == cap(d.buf):
		if d.keep < 0 {
			return true // the buffer holds nothing but what is still to read
		}
		// A kept token fills the buffer: its bytes so far go to spill,
		// and reading goes on in a new buffer.
		next := make([]byte, len(d.buf)-d.i, readerBuffer)
		copy(next, d.buf[d.i:])
		d.spill = append(d.spill, d.buf[:d.i])
		d.kept += d.i
		d.off += int64(d.i)
		d.buf, d.i, d.keep, d.pooled = next, 0, 0, nil
	case start > 0:
		n := copy(d.buf[:cap(d.buf)], d.buf[start:])
		d.buf = d.buf[:n]
		d.off += int64(start)
		d.i -= start
		if d.keep >= 0 {
			d.keep = 0
		}
	}
	for {
		n, err := d.src.Read(d.buf[len(d.buf):cap(d.buf)])
		d.buf = d.buf[:len(d.buf)+n]
		if err != nil {
			d.err = err
		}
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// nextChunk moves on to the next chunk of input held in memory, the kept
// token's bytes in this one going to spill in place.
func (d *replyReader) nextChunk() bool {
	for len(d.chunks) > 0 && len(d.chunks[0]) == 0 {
		d.chunks = d.chunks[1:]
	}
	if len(d.chunks) == 0 {
		d.err = io.EOF
		return false
	}
	if d.keep >= 0 {
		d.spill = append(d.spill, d.buf[d.keep:d.i])
		d.kept += d.i - d.keep
		d.keep = 0
	}
	d.off += int64(len(d.buf))
	d.buf, d.chunks, d.i = d.chunks[0], d.chunks[1:], 0
	return true
}

// ahead returns the next n bytes, or fewer at the end of the input,
// without consuming them. Across chunks held in memory they are a copy.
func (d *replyReader) ahead(n int) []byte {
	for len(d.buf)-d.i < n && d.src != nil && d.err == nil {
		if !d.fill() {
			break
		}
	}
	if len(d.buf)-d.i >= n || d.src != nil {
		return d.buf[d.i:min(len(d.buf), d.i+n)]
	}
	out := append([]byte(nil), d.buf[d.i:]...)
	for _, c := range d.chunks {
		if len(out) >= n {
			break
		}
		out = append(out, c[:min(len(c), n-len(out))]...)
	}
	return out
}

// startKeep keeps what is read from here on, up to max bytes (no limit
// when negative).
func (d *replyReader) startKeep(max int) {
	d.keep, d.spill, d.kept, d.keepMax = d.i, d.spill[:0], 0, max
}

// dropKept stops keeping the token: over its limit, or not to be read on.
func (d *replyReader) dropKept() {
	d.keep, d.spill, d.kept = -1, nil, 0
}

// endKeep stops keeping and returns what was kept, nil if it went over
// its limit: in the buffer (valid until the next read) or, when it
// outgrew it, a copy.
func (d *replyReader) endKeep() []byte {
	if d.keep < 0 {
		return nil
	}
	tail := d.buf[d.keep:d.i]
	d.keep = -1
	if d.keepMax >= 0 && d.kept+len(tail) > d.keepMax {
		d.spill, d.kept = nil, 0
		return nil
	}
	if len(d.spill) == 0 {
		return tail
	}
	out := make([]byte, 0, d.kept+len(tail))
	for _, s := range d.spill {
		out = append(out, s...)
	}
	out = append(out, tail...)
	d.spill, d.kept = nil, 0
	return out
}

// endKeepChunks stops keeping and returns what was kept as chunks that
// stay valid: the buffers it filled and a copy of the rest (chunks held in
// memory are not copied).
func (d *replyReader) endKeepChunks() [][]byte {
	tail := d.buf[d.keep:d.i]
	if d.src != nil {
		tail = append([]byte(nil), tail...)
	}
	out := append(d.spill, tail)
	d.keep, d.spill, d.kept = -1, nil, 0
	return out
}

// consume consumes the next n bytes, which ahead showed.
func (d *replyReader) consume(n int) {
	for range n {
		d.next()
	}
}

// peek is the next byte, whitespace skipped; false at the end of the input.
func (d *replyReader) peek() (byte, bool) {
	for {
		for d.i < len(d.buf) {
			switch c := d.buf[d.i]; c {
			case ' ', '\t', '\n', '\r':
				d.i++
			default:
				return c, true
			}
		}
		if !d.fill() {
			return 0, false
		}
	}
}

// next consumes the next byte, whitespace included.
func (d *replyReader) next() (byte, bool) {
	if d.i == len(d.buf) && !d.fill() {
		return 0, false
	}
	c := d.buf[d.i]
	d.i++
	return c, true
}
