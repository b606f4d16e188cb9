package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A node's error is read only as far as it is used, so that no reply,
// inside the reply cap, can make the client build more than a small
// multiple of it: decoded into Go maps and slices, 7 MiB of [{},{},…] in an
// error's data grew the heap by over 300 MiB.
const (
	// maxErrorText is how much of a node's text is kept: an error's
	// message, each string of its data, and the text of an *Error. Every
	// provider's reply we match (Alchemy's suggested range, at about 270
	// bytes, the longest) fits.
	maxErrorText = 512
	// maxErrorData is the longest error data read; longer data is dropped.
	maxErrorData = 4 << 10
	// maxDataFields is how many fields of an object data are kept.
	maxDataFields = 16
	// maxErrorBody is how much of a non-2xx reply's body is read for the
	// JSON-RPC error it may carry; its text in an *Error is cut at
	// maxErrorText.
	maxErrorBody = 64 << 10
)

// replyError is a JSON-RPC error object of a reply: an rpc.Error and an
// rpc.DataError, as go-ethereum's own, for classify. Its message is cut
// at maxErrorText and its data holds only what classify reads (errorData).
type replyError struct {
	Code    int        `json:"code"`
	Message errorText  `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

func (e *replyError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("json-rpc error %d", e.Code)
	}
	return string(e.Message)
}

// ErrorCode is the JSON-RPC error code.
func (e *replyError) ErrorCode() int { return e.Code }

// ErrorData is the error's data as far as it is read (errorData), or nil.
func (e *replyError) ErrorData() any {
	if e.Data == nil {
		return nil
	}
	return boundedData(e.Data.raw)
}

// errorText is a node's string cut at maxErrorText bytes.
type errorText string

// UnmarshalJSON keeps the first maxErrorText bytes of a JSON string,
// decoded as encoding/json decodes one; null is "".
func (t *errorText) UnmarshalJSON(b []byte) error {
	d := newBytesReader(b)
	s, err := d.readText()
	if err != nil {
		return err
	}
	if _, more := d.peek(); more {
		return d.syntax("the end of a string")
	}
	*t = s
	return nil
}

// readText reads a node's string (errorText), or null (""), without
// holding more of it than maxErrorText bytes.
func (d *replyReader) readText() (errorText, error) {
	head, total, err := d.readTextInto(nil)
	if err != nil {
		return "", err
	}
	return errorText(cutHead(head, total)), nil
}

// readTextInto reads a node's string as readText does, into head: its
// first bytes (as cutHead takes them) and its length; null is empty.
func (d *replyReader) readTextInto(head []byte) ([]byte, int, error) {
	c, ok := d.peek()
	switch {
	case !ok:
		return head, 0, d.syntax("a string")
	case c == 'n':
		return head, 0, d.word("null")
	case c != '"':
		if err := d.skip(); err != nil {
			return head, 0, err
		}
		return head, 0, refuse("a message that is not a string")
	}
	return d.textInto(head, maxErrorText+1)
}

// errorData is a JSON-RPC error's data as far as classify may read it:
// at most maxErrorData bytes of a string or an object, held as given and
// read (boundedData) only when classify asks for it (ErrorData), so that an
// error read and never classified (a batch member that answers another
// call) costs its copy alone. Data longer than maxErrorData bytes or of
// another shape is nil: nothing is built from it.
type errorData struct{ raw []byte }

// UnmarshalJSON keeps b if classify may read it; it never fails.
func (d *errorData) UnmarshalJSON(b []byte) error {
	d.raw = nil
	if len(b) <= maxErrorData {
		d.raw = bytes.Clone(b)
	}
	return nil
}

// boundedData is what classify reads of raw, an error's data (errorData):
// a string, or of an object, of its members whose last value is a string
// (or Infura's rate with its backoff_seconds), the maxDataFields first in
// key order (a key over maxKey bytes, of no use to classify, left out),
// read member by member: no member beyond those is kept (an
// object of 4 KiB of tiny members, decoded whole into a map, cost 33 times
// its size).
func boundedData(raw []byte) any {
	if len(raw) > maxErrorData {
		return nil
	}
	d := newBytesReader(raw)
	c, ok := d.peek()
	switch {
	case !ok:
		return nil
	case c == '"':
		s, err := d.readText()
		if _, more := d.peek(); err != nil || more {
			return nil
		}
		return string(s)
	case c != '{':
		return nil
	}
	var f dataFields
	_, refused, err := d.readObject("the data", func(key []byte) (error, error) { return nil, f.read(d, key) })
	if _, more := d.peek(); err != nil || refused != nil || more {
		return nil
	}
	out := make(map[string]any, len(f.keys))
	for i, k := range f.keys {
		out[k] = f.vals[i]
	}
	return out
}

// dataFields is what boundedData keeps of an object's members, in key
// order: at most maxDataFields.
type dataFields struct {
	keys []string
	vals []any
}

// read reads the value of key's member from d: kept if it is a string, or
// Infura's rate with its backoff_seconds, and among the maxDataFields
// first keys; a member given again replaces the first, as a map decoded
// by encoding/json has it (one whose last value is not kept drops the key).
func (f *dataFields) read(d *replyReader, key []byte) error {
	i := 0
	for i < len(f.keys) && f.keys[i] < string(key) {
		i++
	}
	given := i < len(f.keys) && f.keys[i] == string(key)
	if key == nil || (!given && i == maxDataFields) {
		return d.skip()
	}
	v, ok, err := dataValue(d, key)
	switch {
	case err != nil:
		return err
	case given && ok:
		f.vals[i] = v
	case given:
		f.keys, f.vals = slices.Delete(f.keys, i, i+1), slices.Delete(f.vals, i, i+1)
	case ok:
		f.keys, f.vals = slices.Insert(f.keys, i, string(key)), slices.Insert(f.vals, i, v)
		if len(f.keys) > maxDataFields {
			f.keys, f.vals = f.keys[:maxDataFields], f.vals[:maxDataFields]
		}
	}
	return nil
}

// dataValue reads the value of key's member of an error's data as
// classify reads it: a string (errorText), or, of Infura's rate, its
// backoff_seconds; ok is false for any other value, which is skipped.
func dataValue(d *replyReader, key []byte) (v any, ok bool, err error) {
	c, _ := d.peek()
	switch {
	case c == '"':
		s, err := d.readText()
		return string(s), err == nil, err
	case string(key) == "rate" && c == '{':
		raw, err := d.valueUpTo(maxErrorData)
		var rate struct {
			Backoff *float64 `json:"backoff_seconds"`
		}
		if err != nil || json.Unmarshal(raw, &rate) != nil || rate.Backoff == nil {
			return nil, false, err
		}
		return map[string]any{"backoff_seconds": *rate.Backoff}, true, nil
	}
	return nil, false, d.skip()
}

// cutText is s cut to at most maxErrorText bytes on a rune boundary,
// saying how much was cut; a cut string is a copy, so s's memory is not
// held.
func cutText(s string) string {
	const n = maxErrorText
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.Clone(s[:i]) + fmt.Sprintf("… (%d bytes cut)", len(s)-i)
}

// cutHead is a string of total bytes, of which head holds the first
// (whole runes, at least maxErrorText+1 bytes if there are more), cut as
// cutText cuts it.
func cutHead(head []byte, total int) string {
	const n = maxErrorText
	if total <= n {
		return string(head)
	}
	i := n
	for i > 0 && !utf8.RuneStart(head[i]) {
		i--
	}
	return string(head[:i]) + fmt.Sprintf("… (%d bytes cut)", total-i)
}

// The members of a JSON-RPC error, as replyError names them.
var errorFields = []string{"code", "message", "data"}

// readError reads a reply's error from d as json.Unmarshal into a
// replyError would, as far as classify reads it, holding no more of it
// than that: a message cut at maxErrorText, data of no use to classify
// (an array, a number) or over maxErrorData skipped unheld, a code of more
// digits than an int has refused unread (7 MiB of [{},{},…] as data cost
// over four times the reply when held; a code of millions of digits,
// quoted whole in encoding/json's error, nine times:
// TestHostileRepliesAreBounded). null is an error of no code and no
// message, as json.Unmarshal leaves it; any other value that is not an
// object, or a member of the wrong type, fails the whole reply.
func (d *replyReader) readError() (*replyError, error) {
	e := new(replyError)
	var data errorDataRead
	// A member given again replaces the first, as with json.Unmarshal,
	// read into the same buffers: the message is made a string once.
	var msg []byte
	var msgLen int
	// null: e stays empty, as json.Unmarshal leaves it.
	_, refused, err := d.readObject("the error", func(key []byte) (error, error) {
		switch field(key, errorFields) {
		case 0:
			return d.readCode(&e.Code)
		case 1:
			var err error
			msg, msgLen, err = d.readTextInto(msg[:0])
			return nil, err
		case 2:
			return nil, d.readErrorData(&data)
		}
		return nil, d.skip()
	})
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return nil, fmt.Errorf("the reply's error: %w", refused)
	}
	e.Message = errorText(cutHead(msg, msgLen))
	if data.given {
		e.Data = &errorData{raw: data.raw}
	}
	return e, nil
}

// errorDataRead is an error's data as read so far: given (and not null),
// and its last value if classify may read it.
type errorDataRead struct {
	given bool
	raw   []byte
}

// maxCode is the longest code read: an int has at most 19 digits and a sign.
const maxCode = 20

// readCode reads an error's code into code: an integer, or null (which
// leaves it as it is).
func (d *replyReader) readCode(code *int) (refused, err error) {
	c, ok := d.peek()
	switch {
	case !ok:
		return nil, d.syntax("an error's code")
	case c == 'n':
		return nil, d.word("null")
	case c != '-' && (c < '0' || c > '9'):
		return refuse("its code is not a number"), d.skip()
	}
	d.startKeep(maxCode)
	n, err := d.number()
	if err != nil {
		d.dropKept()
		return nil, err
	}
	raw := d.endKeep()
	v, perr := strconv.ParseInt(string(raw), 10, 0)
	if raw == nil || perr != nil {
		return refuse("its code, a number of %d bytes, is not an int", n), nil
	}
	*code = int(v)
	return nil, nil
}

// readErrorData reads an error's data into data: a string or an object,
// kept if classify may read it (boundedData), else nothing; null leaves
// it absent. The last given counts, decoded once the error is read.
func (d *replyReader) readErrorData(data *errorDataRead) error {
	c, ok := d.peek()
	switch {
	case !ok:
		return d.syntax("an error's data")
	case c == 'n':
		data.given = false
		return d.word("null")
	case c == '"' || c == '{':
		v, err := d.valueUpTo(maxErrorData)
		data.given, data.raw = true, append(data.raw[:0], v...)
		return err
	}
	data.given, data.raw = true, data.raw[:0]
	return d.skip()
}
