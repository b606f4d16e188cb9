package chain

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

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
