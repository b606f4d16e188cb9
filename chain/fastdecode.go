package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/ethereum/go-ethereum/core/types"
)

// The results of logs, receipts and headers, the poller's largest replies
// by far, are read in one pass by the reply reader (replyreader.go),
// straight into the values the client uses, with a few allocations per
// reply rather than several per log: encoding/json took most of the
// poller's CPU on dense ranges (BENCHMARKS.md). They are read as
// encoding/json reads them into rpcLog, rpcReceipt and rpcHeader (keys
// whatever the case of their letters, a key given twice taking its last
// value, null leaving a field absent, hex values by hexutil's rules),
// and each element is checked as it is read: a log must have its
// address, topics, data and transaction hash, and at most four topics; a
// receipt its transaction hash, block hash and status. An element that
// cannot be one fails the result there, before another is decoded, and
// the rest of the result is skipped unheld: a reply of millions of tiny
// elements ([{},{},…]) costs what one of them does
// (TestHostileRepliesAreBounded). FuzzFastDecodeIsUnmarshal holds the
// reader to encoding/json and those checks.

// maxSmallResult is the longest result of any other type (a chain id, a
// block number, a subscription id): read whole and decoded by
// encoding/json, it is refused when longer.
const maxSmallResult = 64 << 10

// decodeResult decodes one reply's result, raw, into result, as the reply
// reader does when the result streams in (readResult). A result that is
// not JSON gives its error too.
func decodeResult(raw []byte, result any) error {
	d := newBytesReader(raw)
	decodeErr, err := d.readResult(result)
	if err != nil {
		return err
	}
	if _, more := d.peek(); more {
		return d.syntax("the end of the result")
	}
	return decodeErr
}

// refuse is the error of a result the reader refuses (an element that
// cannot be a log or a receipt, a value of the wrong type or form), a bad
// reply, saying why: in the client's words, never the node's bytes.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadReply}, args...)...)
}

// readResult reads the next value, a reply's result, into result (an
// element's Result, whose earlier value it replaces: a result given twice
// takes the last, as go-ethereum's client does), and returns the error
// decoding it gave, or err if the reply is not JSON or could not be read,
// which fails the whole reply.
func (d *replyReader) readResult(result any) (decodeErr, err error) {
	switch p := result.(type) {
	case *[]types.Log:
		*p = nil
		return d.readLogs(p)
	case *[]rpcReceipt:
		*p = nil
		return d.readReceipts(p)
	case **rpcReceipt:
		*p = nil
		return d.readReceiptOrNull(p)
	case **rpcHeader:
		*p = nil
		return d.readHeaderOrNull(p)
	}
	if _, ok := d.peek(); !ok {
		return nil, d.syntax("a result")
	}
	v, err := d.valueUpTo(maxSmallResult)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return refuse("a result over %d bytes, for %T", maxSmallResult, result), nil
	}
	if rv := reflect.ValueOf(result); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	if err := json.Unmarshal(v, result); err != nil {
		return errors.New(cutText(err.Error())), nil
	}
	return nil, nil
}

// valueUpTo reads the next value whole, if it is at most max bytes (nil
// otherwise), checking it is JSON: in the buffer, valid until the next
// read, or a copy.
func (d *replyReader) valueUpTo(max int) ([]byte, error) {
	if _, ok := d.peek(); !ok {
		return nil, d.syntax("a value")
	}
	d.startKeep(max)
	if err := d.skip(); err != nil {
		d.dropKept()
		return nil, err
	}
	return d.endKeep(), nil
}

// capture reads the next value whole, checking it is JSON, as chunks that
// stay valid (a result read before the id that says whose it is).
func (d *replyReader) capture() ([][]byte, error) {
	if _, ok := d.peek(); !ok {
		return nil, d.syntax("a value")
	}
	d.startKeep(-1)
	if err := d.skip(); err != nil {
		d.dropKept()
		return nil, err
	}
	return d.endKeepChunks(), nil
}

// readArray reads an array (null is nil, as encoding/json makes it),
// each element with elem, given its index. An element elem refuses
// refuses the array: the rest of it is skipped.
func (d *replyReader) readArray(what string, elem func(i int) (refused, err error)) (null bool, refused, err error) {
	c, ok := d.peek()
	switch {
	case !ok:
		return false, nil, d.syntax(what)
	case c == 'n':
		return true, nil, d.word("null")
	case c != '[':
		return false, refuse("%s is not an array", what), d.skip()
	}
	if err := d.open('['); err != nil {
		return false, nil, err
	}
	if d.empty(']') {
		return false, nil, nil
	}
	for i := 0; ; i++ {
		if refused == nil {
			refused, err = elem(i)
		} else {
			err = d.skip()
		}
		if err != nil {
			return false, refused, err
		}
		more, err := d.more(']')
		if err != nil || !more {
			return false, refused, err
		}
	}
}

// readObject reads an object, handing each member's key (nil if longer
// than maxKey) to member, which reads its value; once member refuses
// one, the rest are skipped. null is an object of no members; a value of
// another kind is refused.
func (d *replyReader) readObject(what string, member func(key []byte) (refused, err error)) (null bool, refused, err error) {
	c, ok := d.peek()
	switch {
	case !ok:
		return false, nil, d.syntax(what)
	case c == 'n':
		return true, nil, d.word("null")
	case c != '{':
		return false, refuse("%s is not an object", what), d.skip()
	}
	if err := d.open('{'); err != nil {
		return false, nil, err
	}
	if d.empty('}') {
		return false, nil, nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return false, refused, err
		}
		if refused == nil {
			refused, err = member(key)
		} else {
			err = d.skip()
		}
		if err != nil {
			return false, refused, err
		}
		more, err := d.more('}')
		if err != nil || !more {
			return false, refused, err
		}
	}
}

// field is the index in names of the field encoding/json decodes a
// member of key into: the name equal to key whatever the case of its
// letters (as bytes.EqualFold has it), or -1.
func field(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	ascii := true
	for _, c := range key {
		ascii = ascii && c < 0x80
	}
	for i, n := range names {
		if ascii && foldEqual(key, n) || !ascii && bytes.EqualFold(key, []byte(n)) {
			return i
		}
	}
	return -1
}

// foldEqual says whether key and w, ASCII, are equal whatever the case
// of their letters.
func foldEqual(key []byte, w string) bool {
	if len(key) != len(w) {
		return false
	}
	for i := range key {
		a, b := key[i], w[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
