package chain

import (
	"fmt"
)

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
