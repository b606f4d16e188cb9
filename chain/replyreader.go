package chain

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode"
	"unicode/utf16"
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

// take consumes c, the next byte after whitespace, if it is.
func (d *replyReader) take(c byte) bool {
	if b, ok := d.peek(); ok && b == c {
		d.i++
		return true
	}
	return false
}

// expect consumes c, the next byte after whitespace, or fails.
func (d *replyReader) expect(c byte, what string) error {
	if !d.take(c) {
		return d.syntax(what)
	}
	return nil
}

// open consumes a container's opening byte and counts its depth.
func (d *replyReader) open(c byte) error {
	if err := d.expect(c, "a value"); err != nil {
		return err
	}
	d.depth++
	if d.depth > maxNesting {
		return fmt.Errorf("%w: nested deeper than %d", errNotJSON, maxNesting)
	}
	return nil
}

// more reads what follows a member or an element of the container open
// at the reader (closing '}' or ']'): true after a comma, false once the
// container is closed.
func (d *replyReader) more(closing byte) (bool, error) {
	c, ok := d.peek()
	switch {
	case ok && c == ',':
		d.i++
		return true, nil
	case ok && c == closing:
		d.i++
		d.depth--
		return false, nil
	}
	return false, d.syntax("a container")
}

// empty consumes the closing byte of a container just opened, if it is
// next: the container is empty.
func (d *replyReader) empty(closing byte) bool {
	if d.take(closing) {
		d.depth--
		return true
	}
	return false
}

// word reads the literal w (true, false, null).
func (d *replyReader) word(w string) error {
	for i := 0; i < len(w); i++ {
		if c, ok := d.next(); !ok || c != w[i] {
			if ok {
				d.i--
			}
			return d.syntax("a literal")
		}
	}
	return nil
}

// null consumes null if it is the next value.
func (d *replyReader) null() (bool, error) {
	if c, ok := d.peek(); ok && c == 'n' {
		return true, d.word("null")
	}
	return false, nil
}

// skip reads one value whole, checking it is JSON, and holds none of it.
func (d *replyReader) skip() error {
	var small [64]byte
	closers := small[:0] // of the containers the value opened
	for {
		c, ok := d.peek()
		if !ok {
			return d.syntax("a value")
		}
		if c != '{' && c != '[' {
			if err := d.skipScalar(c); err != nil {
				return err
			}
		} else {
			opened, err := d.skipOpen(c, len(closers))
			if err != nil {
				return err
			}
			if opened != 0 {
				closers = append(closers, opened)
				continue
			}
		}
		// After a value: close what it ends, or go on to the next one.
		var err error
		if closers, err = d.skipAfter(closers); err != nil || len(closers) == 0 {
			return err
		}
	}
}

// skipOpen reads the opening c of a container inside open others, and
// its first key if it is an object: it returns the container's closing
// byte, or 0 if it is empty (and closed).
func (d *replyReader) skipOpen(c byte, open int) (byte, error) {
	d.i++
	if d.depth+open+1 > maxNesting {
		return 0, fmt.Errorf("%w: nested deeper than %d", errNotJSON, maxNesting)
	}
	closing := byte(']')
	if c == '{' {
		closing = '}'
	}
	if d.take(closing) {
		return 0, nil
	}
	if closing == '}' {
		return closing, d.skipKey()
	}
	return closing, nil
}

// skipScalar reads a string, a literal or a number, c its first byte.
func (d *replyReader) skipScalar(c byte) error {
	switch c {
	case '"':
		return d.skipString()
	case 't':
		return d.word("true")
	case 'f':
		return d.word("false")
	case 'n':
		return d.word("null")
	}
	_, err := d.number()
	return err
}

// skipAfter reads what follows a value inside the containers closers
// closes (innermost last): the closings of those it ends, then a comma
// (and a key, in an object) before the next value, unless it ended them
// all. It returns the containers still open.
func (d *replyReader) skipAfter(closers []byte) ([]byte, error) {
	for len(closers) > 0 {
		closing := closers[len(closers)-1]
		c, ok := d.peek()
		switch {
		case ok && c == closing:
			d.i++
			closers = closers[:len(closers)-1]
			continue
		case !ok || c != ',':
			return closers, d.syntax("a container")
		}
		d.i++
		if closing == '}' {
			return closers, d.skipKey()
		}
		return closers, nil
	}
	return closers, nil
}

// skipKey reads a member's key and its colon.
func (d *replyReader) skipKey() error {
	if c, ok := d.peek(); !ok || c != '"' {
		return d.syntax("an object's key")
	}
	if err := d.skipString(); err != nil {
		return err
	}
	return d.expect(':', "an object's member")
}

// skipString reads a string (its '"' next), escapes checked.
func (d *replyReader) skipString() error {
	d.i++ // '"'
	_, err := d.stringBody()
	return err
}

// stringBody reads the rest of a string after its opening quote,
// checking its escapes, and says whether it held any.
func (d *replyReader) stringBody() (escaped bool, err error) {
	for {
		b := d.buf[d.i:]
		j := 0
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 {
			j++
		}
		d.i += j
		if j == len(b) {
			if !d.fill() {
				return escaped, d.syntax("a string")
			}
			continue
		}
		switch c := b[j]; {
		case c == '"':
			d.i++
			return escaped, nil
		case c < 0x20:
			return escaped, d.syntax("a string")
		}
		escaped = true
		d.i++ // '\\'
		if _, err := d.escape(); err != nil {
			return escaped, err
		}
	}
}

// escape reads an escape after its backslash and returns the rune it
// stands for (a \u escape's code unit, surrogates included).
func (d *replyReader) escape() (rune, error) {
	e, ok := d.next()
	if !ok {
		return 0, d.syntax("a string")
	}
	switch e {
	case '"', '\\', '/':
		return rune(e), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		var r rune
		for range 4 {
			c, ok := d.next()
			v := unhex(c)
			if !ok || v < 0 {
				if ok {
					d.i--
				}
				return 0, d.syntax("a string's \\u escape")
			}
			r = r<<4 | v
		}
		return r, nil
	}
	d.i--
	return 0, d.syntax("a string's escape")
}

// unhex is the value of hex digit c, or -1.
func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// number reads a JSON number, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// and says how many bytes it has.
func (d *replyReader) number() (int, error) {
	n := 0
	c, ok := d.peek()
	if ok && c == '-' {
		d.i++
		n++
		c, ok = d.ahead1()
	}
	switch {
	case ok && c == '0':
		d.i++
		n++
	case ok && c >= '1' && c <= '9':
		n += d.digits()
	default:
		return n, d.syntax("a value")
	}
	if c, ok := d.ahead1(); ok && c == '.' {
		d.i++
		n++
		m := d.digits()
		if m == 0 {
			return n, d.syntax("a number")
		}
		n += m
	}
	if c, ok := d.ahead1(); ok && (c == 'e' || c == 'E') {
		d.i++
		n++
		if c, ok := d.ahead1(); ok && (c == '+' || c == '-') {
			d.i++
			n++
		}
		m := d.digits()
		if m == 0 {
			return n, d.syntax("a number")
		}
		n += m
	}
	return n, nil
}

// ahead1 is the next byte, not consumed and whitespace not skipped.
func (d *replyReader) ahead1() (byte, bool) {
	if d.i == len(d.buf) && !d.fill() {
		return 0, false
	}
	return d.buf[d.i], true
}

// digits reads decimal digits and says how many.
func (d *replyReader) digits() int {
	n := 0
	for {
		b := d.buf[d.i:]
		j := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		d.i += j
		n += j
		if j < len(b) || !d.fill() {
			return n
		}
	}
}

// str reads a string (its '"' next, peeked) and returns its raw contents, quotes
// left out and escapes as they are, if they are at most max bytes (nil
// otherwise: over says so): in the buffer, valid until the next read, or
// a copy. escaped says whether it held escapes.
func (d *replyReader) str(max int) (raw []byte, escaped, over bool, err error) {
	d.i++ // '"'
	d.startKeep(max)
	escaped, err = d.stringBody()
	if err != nil {
		d.dropKept()
		return nil, escaped, false, err
	}
	d.i-- // leave the closing quote out
	raw = d.endKeep()
	d.i++
	if raw == nil {
		return nil, escaped, true, nil
	}
	return raw, escaped, false, nil
}

// text reads a string (its '"' next, peeked) decoded as encoding/json decodes
// one (escapes, surrogate pairs, bytes that are not UTF-8 replaced by
// U+FFFD): the first bytes of it, whole runes up to at least limit bytes
// (all of it if shorter), and its whole length.
func (d *replyReader) text(limit int) (head []byte, total int, err error) {
	return d.textInto(nil, limit)
}

// textInto is text, the head appended to head.
func (d *replyReader) textInto(head []byte, limit int) (_ []byte, total int, err error) {
	d.i++ // '"'
	var r [utf8.UTFMax]byte
	for {
		b := d.buf[d.i:]
		j := 0
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 && b[j] < utf8.RuneSelf {
			j++
		}
		if j > 0 {
			if len(head) < limit {
				head = append(head, b[:min(j, limit-len(head))]...)
			}
			total += j
			d.i += j
		}
		if j == len(b) {
			if !d.fill() {
				return head, total, d.syntax("a string")
			}
			continue
		}
		var text []byte // what the next bytes stand for
		switch c := b[j]; {
		case c == '"':
			d.i++
			return head, total, nil
		case c < 0x20:
			return head, total, d.syntax("a string")
		case c == '\\':
			d.i++
			rr, err := d.escapedRune()
			if err != nil {
				return head, total, err
			}
			text = r[:utf8.EncodeRune(r[:], rr)]
		default:
			text = d.rune(&r)
		}
		if len(head) < limit {
			head = append(head, text...)
		}
		total += len(text)
	}
}

// escapedRune reads an escape after its backslash, and the rune it
// stands for as encoding/json decodes it: a \u surrogate pair makes one
// rune, a lone half of one U+FFFD.
func (d *replyReader) escapedRune() (rune, error) {
	rr, err := d.escape()
	if err != nil || !utf16.IsSurrogate(rr) {
		return rr, err
	}
	second := surrogate(d.ahead(6))
	if dec := utf16.DecodeRune(rr, second); second >= 0 && dec != unicode.ReplacementChar {
		d.consume(6)
		return dec, nil
	}
	return unicode.ReplacementChar, nil
}

// rune reads the next rune of a string, not ASCII, and returns its bytes
// as encoding/json decodes them: a byte that is no UTF-8 becomes U+FFFD.
func (d *replyReader) rune(r *[utf8.UTFMax]byte) []byte {
	la := d.ahead(utf8.UTFMax)
	rr, size := utf8.DecodeRune(la)
	text := la[:size]
	if rr == utf8.RuneError && size == 1 {
		text = r[:utf8.EncodeRune(r[:], rr)]
	} else {
		text = append(r[:0], text...) // ahead's bytes go with the read
	}
	d.consume(size)
	return text
}

// surrogate is the code unit of the \u escape b starts with, or -1.
func surrogate(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		v := unhex(c)
		if v < 0 {
			return -1
		}
		r = r<<4 | v
	}
	return r
}

// key reads a member's key and its colon: the key decoded, or nil if it
// is longer than maxKey bytes (it can then be none a reader wants). It is
// valid until the next read.
func (d *replyReader) key() ([]byte, error) {
	if c, ok := d.peek(); !ok || c != '"' {
		return nil, d.syntax("an object's key")
	}
	// A plain key, in the buffer: a copy of it.
	b := d.buf[d.i+1:]
	for j := 0; j < len(b) && j <= maxKey; j++ {
		if c := b[j]; c == '"' {
			d.i += j + 2
			k := append(d.keyBuf[:0], b[:j]...)
			if c, ok := d.peek(); ok && c == ':' {
				d.i++
				return k, nil
			}
			return nil, d.syntax("an object's member")
		} else if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	d.keyBuf = [len(d.keyBuf)]byte{}
	head, total, err := d.textInto(d.keyBuf[:0], maxKey)
	if err != nil {
		return nil, err
	}
	if total > maxKey {
		head = nil
	}
	return head, d.expect(':', "an object's member")
}
