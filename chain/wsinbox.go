package chain

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// wsPeek is how much of a message is looked at for its id before its
// reply is decoded from the connection as it comes.
const wsPeek = 4 << 10

// wsInbox is what a connection's reader reads each message with: made
// once and used again for every message, as one goroutine reads them all.
// A node may send any number of messages that answer nothing, each of a
// few bytes; a buffer and readers made for each would cost it over a
// thousand times their size (docs/operations/security.md bounds any reply
// to four), where these cost it nothing of its own.
type wsInbox struct {
	msg  messageReader // the message being read
	br   *bufio.Reader // its first wsPeek bytes, peeked; then the rest
	head [1][]byte     // the peeked bytes, as the scan's input
	// scan reads the peek, or the whole message, for its id: quietly, its
	// errors being dropped.
	scan replyReader
}

func newWSInbox() *wsInbox {
	in := &wsInbox{}
	in.br = bufio.NewReaderSize(&in.msg, wsPeek)
	return in
}

// dispatch decodes the message in reads (in.msg), a reply or a
// notification, for whoever waits for it, and returns the request it
// answered, if any, and the decoding's error. The id is looked for in the
// first wsPeek bytes (nodes write it first), then, if they do not show it
// whole, in the whole message, read into memory once (messageChunks) and
// decoded from there in place. A reader to decode with is made only for a
// message that answers a waiting request: its cost is then one of the
// client's requests, not one of the node's messages.
func (c *wsConn) dispatch(in *wsInbox) (*wsRequest, error) {
	in.br.Reset(&in.msg)
	head, err := in.br.Peek(wsPeek)
	// A peek that did not reach the message's end is cut: full, or its
	// reading failed.
	cut := !errors.Is(err, io.EOF)
	in.head[0] = head
	id, notification, found := in.firstID(in.head[:], cut)
	in.head[0] = nil
	var chunks [][]byte
	if !found && cut {
		if chunks, err = messageChunks(in.br); err != nil {
			return nil, err
		}
		id, notification, found = in.firstID(chunks, false)
	}
	if notification && c.notify != nil {
		c.notify()
	}
	if !found {
		return nil, nil
	}
	r := c.answered(id)
	if r == nil {
		return nil, nil // unknown, or given up on
	}
	var d *replyReader
	if chunks != nil {
		d = newBytesReader(chunks...)
	} else {
		d = newStreamReader(in.br)
		defer d.release()
	}
	if r.lone {
		return r, d.readCall(&r.elems[0])
	}
	return r, d.readBatch(r.elems, r.base)
}

// messageChunks reads the rest of a message, at least wsPeek bytes, into
// chunks that grow with it, from wsPeek bytes to readerBuffer: as much
// memory as the message, at most twice it, where reading it into one
// slice grown as it comes allocates several times that, and chunks of
// readerBuffer bytes from the start many times a message just over the
// peek.
func messageChunks(r io.Reader) ([][]byte, error) {
	var chunks [][]byte
	size, total := wsPeek, 0
	for {
		b := make([]byte, size)
		n, err := io.ReadFull(r, b)
		if n > 0 {
			chunks = append(chunks, b[:n:n])
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return chunks, nil
		case err != nil:
			return nil, err
		}
		total += n
		size = min(total, readerBuffer)
	}
}

// messageReader keeps the error a message's reading failed with.
type messageReader struct {
	r   io.Reader
	err error
}

func (m *messageReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && m.err == nil {
		m.err = err
	}
	return n, err
}

// firstID reads chunks, a message or (cut) its start, for its id with the
// inbox's own reader (firstID).
func (in *wsInbox) firstID(chunks [][]byte, cut bool) (id int64, notification, found bool) {
	in.scan = replyReader{chunks: chunks, keep: -1, quiet: true}
	return firstID(&in.scan, cut)
}

// firstID is the id of the first reply that d, a message or (cut) its
// start, shows with an id (in a batch, the first element that has one:
// the request it answers is the one all of it answers); notification says
// the message is a subscription notification. What is not an object is
// skipped, not handed to readObject, which would make an error refusing
// it: every message a node sends could be such.
func firstID(d *replyReader, cut bool) (id int64, notification, found bool) {
	c, ok := d.peek()
	if !ok || c != '[' {
		if ok && c == '{' {
			id, notification, found, _ = replyID(d, cut)
		}
		return id, notification, found
	}
	if d.open('[') != nil || d.empty(']') {
		return 0, false, false
	}
	for {
		var err error
		if c, ok := d.peek(); ok && c == '{' {
			id, notification, found, err = replyID(d, cut)
		} else {
			err = d.skip()
		}
		if found || notification || err != nil {
			return id, notification, found
		}
		if more, err := d.more(']'); err != nil || !more {
			return 0, false, false
		}
	}
}

// replyID reads a reply object as far as its id or its method: the id, if
// it is one; notification says the method is eth_subscription's. err
// says the reading failed (the start of a message ends there). In the
// start of a message (cut), an id that reaches its end is none: a number
// goes on past it ("1" of "10" is another request's id), and the whole
// message is read for it.
func replyID(d *replyReader, cut bool) (id int64, notification, found bool, err error) {
	_, _, err = d.readObject("the reply", func(key []byte) (error, error) {
		switch string(key) {
		case "id":
			v, err := d.valueUpTo(maxID)
			if err != nil {
				return nil, err
			}
			if cut && d.atEnd() {
				return nil, errIDCut
			}
			if id, found = idNumber(v); found {
				return nil, errFound
			}
			return nil, nil
		case "method":
			v, err := d.valueUpTo(len(`"eth_subscription"`))
			if notification = string(v) == `"eth_subscription"`; err == nil && notification {
				err = errFound
			}
			return nil, err
		}
		return nil, d.skip()
	})
	if errors.Is(err, errFound) {
		err = nil
	}
	return id, notification, found, err
}

// atEnd says whether nothing follows in the input.
func (d *replyReader) atEnd() bool {
	_, more := d.ahead1()
	return !more
}

// errFound stops firstID's reading once it has found what it looks for,
// and errIDCut once the id it found may go on past what it reads.
var (
	errFound = errors.New("found")
	errIDCut = errors.New("the id reaches the end of the message's start")
)

// idNumber is the integer id v (nil if it was too long to be read) gives,
// quoted or not, as strconv.ParseInt reads it in base 10 once the quotes
// are trimmed, up to 18 digits: longer, it names none of the client's
// requests, which count from 1. It allocates nothing, where ParseInt's
// error for an id that is not a number would, for every such message.
func idNumber(v []byte) (int64, bool) {
	v = bytes.Trim(v, `"`)
	neg := len(v) > 0 && v[0] == '-'
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
