package chain

import (
	"encoding/hex"
	"encoding/json"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeResult decodes one reply's result, raw, into result, as
// json.Unmarshal does. Logs and receipts, the poller's largest replies by
// far, are read by a scanner made for their shape, in one pass and with a
// few allocations per reply rather than several per log: encoding/json
// took most of the poller's CPU on dense ranges (BENCHMARKS.md). The
// scanner takes only what it is sure of: plain JSON, keys spelled as
// nodes spell them, values of the types the fields want. Anything else (a
// key in other case, an escaped string, a value encoding/json would refuse
// or read leniently, a key given twice where encoding/json would merge the
// two values) is left to encoding/json, which then decides, so the result
// is always what json.Unmarshal gives (FuzzFastDecodeIsUnmarshal).
func decodeResult(raw []byte, result any) error {
	switch p := result.(type) {
	case *[]rpcLog:
		if *p == nil {
			return fastOr(raw, p, (*scanner).logs)
		}
	case *[]rpcReceipt:
		if *p == nil {
			return fastOr(raw, p, (*scanner).receipts)
		}
	case **rpcReceipt:
		if *p == nil {
			return fastOr(raw, p, (*scanner).receiptOrNull)
		}
	}
	return json.Unmarshal(raw, result)
}

// streamResult reads one reply's result from dec into result, as
// decodeResult does (but for which error names a refused array:
// streamArray), and returns the result's decoding error and, apart,
// the reader's (JSON not well formed, a failed read), which fails the
// whole reply. An array of logs or receipts is read element by element:
// the decoder's buffer holds the largest element (a log, or one
// transaction's receipt) rather than the result, which for a block of
// thousands of burns is megabytes, several replies at once. encoding/json
// decodes an array element by element too, so an element the scanner
// leaves to it decodes as it would have there.
func streamResult(dec *jsontext.Decoder, result any) (decodeErr, readErr error) {
	if dec.PeekKind() == '[' {
		switch p := result.(type) {
		case *[]rpcLog:
			if *p == nil {
				return streamArray(dec, p, (*scanner).log)
			}
		case *[]rpcReceipt:
			if *p == nil {
				return streamArray(dec, p, (*scanner).receipt)
			}
		}
	}
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	return decodeResult(v, result), nil
}

// streamArray reads an array (its '[' next in dec) into *p, each element
// with parse or, where parse gives up, with json.Unmarshal. An array that
// json.Unmarshal decodes without error decodes to the same value here. One
// it refuses is refused here too, with the first failing element's error,
// the rest decoded all the same; encoding/json may name another element's
// (an error of a field's own decoder stops it at once, a value of the
// wrong kind does not) and stop short.
func streamArray[T any](dec *jsontext.Decoder, p *[]T, parse func(*scanner, *T) bool) (decodeErr, readErr error) {
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	out := []T{}
	var s scanner // one for all elements: its blocks of topics and data are shared
	for dec.PeekKind() != ']' {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		var zero T
		out = append(out, zero)
		e := &out[len(out)-1]
		s.b, s.i = v, 0
		s.space()
		if parse(&s, e) && s.end() {
			continue
		}
		*e = zero
		if err := json.Unmarshal(v, e); err != nil && decodeErr == nil {
			decodeErr = err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // ']'
		return nil, err
	}
	*p = out
	return decodeErr, nil
}

// fastOr decodes raw into p with parse, if parse takes all of it, or else
// with json.Unmarshal.
func fastOr[T any](raw []byte, p *T, parse func(*scanner) (T, bool)) error {
	s := scanner{b: raw}
	s.space()
	if v, ok := parse(&s); ok && s.end() {
		*p = v
		return nil
	}
	return json.Unmarshal(raw, p)
}

// maxDepth is how deeply a value the scanner skips may nest: deeper is left
// to encoding/json, to accept or refuse (its limit, 10,000 levels, counts
// from the top of the result, which the scanner's does not).
const maxDepth = 1000

// scanner reads JSON from b at i. Each method returns false on anything it
// does not take, and its caller then gives up the whole value. Decoded
// topics and data are cut from shared blocks, a few allocations a reply.
type scanner struct {
	b      []byte
	i      int
	hashes []common.Hash
	data   []byte
	flags  []bool
}

// Blocks of decoded topics and data: a dense reply's logs share a few.
const (
	hashBlock = 512
	dataBlock = 32 << 10
	flagBlock = 1024
)

// flag returns a bool of its own holding v, cut from a shared block: a
// log's Removed may be written through later (encoding/json decoding into
// a result already decoded, as a reply giving its result twice has it do).
func (s *scanner) flag(v bool) *bool {
	if len(s.flags) == cap(s.flags) {
		s.flags = make([]bool, 0, flagBlock)
	}
	s.flags = append(s.flags, v)
	return &s.flags[len(s.flags)-1]
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end says whether nothing but space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// peek is the next byte, 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// take reads c, if it is next.
func (s *scanner) take(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// word reads w, if it is next (true, false, null). What follows is checked
// by the caller, which wants a comma, a bracket or the end.
func (s *scanner) word(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// plain reads a string with no escapes and no control characters, and
// returns what is between its quotes.
func (s *scanner) plain() ([]byte, bool) {
	if !s.take('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// The values below are decoded by the text decoders hexutil's own JSON
// decoders call, on a plain string's contents: the same rules, whatever
// the scanner takes.

// fixed reads a hex string of exactly len(out) bytes into out (a hash, an
// address).
func (s *scanner) fixed(out []byte) bool {
	v, ok := s.plain()
	return ok && hexutil.UnmarshalFixedText("", v, out) == nil
}

// bytes reads a hex string of any even length (hexutil.Bytes) into a
// slice cut from the scanner's block of data.
func (s *scanner) bytes() ([]byte, bool) {
	v, ok := s.plain()
	if !ok || len(v) < 2 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X') || len(v)%2 != 0 {
		return nil, false // hexutil.Bytes takes "" too: encoding/json decides
	}
	d := v[2:]
	n := len(d) / 2
	var out []byte
	switch {
	case n == 0:
		return []byte{}, true // present, and empty: not nil
	case n > dataBlock/4:
		out = make([]byte, n)
	default:
		if cap(s.data)-len(s.data) < n {
			s.data = make([]byte, 0, dataBlock)
		}
		l := len(s.data)
		s.data = s.data[:l+n]
		out = s.data[l : l+n : l+n]
	}
	if _, err := hex.Decode(out, d); err != nil {
		return nil, false
	}
	return out, true
}

// quantity reads a hex quantity of at most 64 bits.
func (s *scanner) quantity() (hexutil.Uint64, bool) {
	var q hexutil.Uint64
	v, ok := s.plain()
	return q, ok && q.UnmarshalText(v) == nil
}

// uintQuantity reads a quantity that fits a uint.
func (s *scanner) uintQuantity() (hexutil.Uint, bool) {
	var q hexutil.Uint
	v, ok := s.plain()
	return q, ok && q.UnmarshalText(v) == nil
}

// topics reads an array of hashes.
func (s *scanner) topics() ([]common.Hash, bool) {
	if !s.take('[') {
		return nil, false
	}
	var buf [4]common.Hash
	got := buf[:0]
	s.space()
	if !s.take(']') {
		for {
			s.space()
			var h common.Hash
			if !s.fixed(h[:]) {
				return nil, false
			}
			got = append(got, h)
			s.space()
			if s.take(']') {
				break
			}
			if !s.take(',') {
				return nil, false
			}
		}
	}
	n := len(got)
	if n == 0 {
		return []common.Hash{}, true // present, and empty: not nil
	}
	if cap(s.hashes)-len(s.hashes) < n {
		s.hashes = make([]common.Hash, 0, max(hashBlock, n))
	}
	l := len(s.hashes)
	s.hashes = s.hashes[:l+n]
	out := s.hashes[l : l+n : l+n]
	copy(out, got)
	return out, true
}

// object reads an object, handing each member's key to field, which reads
// its value.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.take('{') {
		return false
	}
	s.space()
	if s.take('}') {
		return true
	}
	for {
		s.space()
		key, ok := s.plain()
		if !ok {
			return false
		}
		s.space()
		if !s.take(':') {
			return false
		}
		s.space()
		if !field(key) {
			return false
		}
		s.space()
		if s.take('}') {
			return true
		}
		if !s.take(',') {
			return false
		}
	}
}

// array reads an array of objects, each read by elem, which is handed the
// element's index after growing the array to hold it; null is nil, [] an
// empty array, as encoding/json makes them.
func array[T any](s *scanner, elem func(*T) bool) ([]T, bool) {
	if s.word("null") {
		return nil, true
	}
	if !s.take('[') {
		return nil, false
	}
	out := []T{}
	s.space()
	if s.take(']') {
		return out, true
	}
	for {
		s.space()
		var zero T
		out = append(out, zero)
		if !elem(&out[len(out)-1]) {
			return nil, false
		}
		s.space()
		if s.take(']') {
			return out, true
		}
		if !s.take(',') {
			return nil, false
		}
	}
}

// other reads the value of a key the caller does not want, unless
// encoding/json would take the key for one it does (keys match whatever
// their case, and non-ASCII letters fold to ASCII ones).
func (s *scanner) other(key []byte, wanted []string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return false
		}
	}
	for _, w := range wanted {
		if foldEqual(key, w) {
			return false
		}
	}
	return s.skip(0)
}

// foldEqual says whether key and w are equal whatever the case of their
// ASCII letters.
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

// skip reads any one JSON value, checking it is well formed.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return false
	}
	switch s.peek() {
	case '"':
		return s.skipString()
	case '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case '[':
		s.i++
		s.space()
		if s.take(']') {
			return true
		}
		for {
			s.space()
			if !s.skip(depth + 1) {
				return false
			}
			s.space()
			if s.take(']') {
				return true
			}
			if !s.take(',') {
				return false
			}
		}
	case 't':
		return s.word("true")
	case 'f':
		return s.word("false")
	case 'n':
		return s.word("null")
	default:
		return s.number()
	}
}

// skipString reads a string, escapes included.
func (s *scanner) skipString() bool {
	s.i++ // '"'
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.b) {
				return false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.b)-s.i < 4 {
					return false
				}
				if _, err := hex.DecodeString(string(s.b[s.i : s.i+4])); err != nil {
					return false
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.take('-')
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.take('.') && !s.digits() {
		return false
	}
	if s.take('e') || s.take('E') {
		if !s.take('+') {
			s.take('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// The keys of a log and of a receipt, as rpcLog and rpcReceipt spell them.
var (
	logKeys     = []string{"address", "topics", "data", "blockNumber", "transactionHash", "transactionIndex", "blockHash", "logIndex", "removed"}
	receiptKeys = []string{"transactionHash", "blockHash", "status", "logs"}
)

// logs reads an eth_getLogs result, or a receipt's logs.
func (s *scanner) logs() ([]rpcLog, bool) {
	return array(s, s.log)
}

// log reads one log as rpcLog's decoder does: null leaves an optional
// field absent, and a key given twice takes its last value.
func (s *scanner) log(l *rpcLog) bool {
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "address", "topics", "data", "blockNumber", "transactionHash", "blockHash", "transactionIndex", "logIndex", "removed":
			return s.logField(l, key, s.word("null"))
		}
		return s.other(key, logKeys)
	})
}

// logField reads the value of l's field key, null or not.
func (s *scanner) logField(l *rpcLog, key []byte, null bool) bool {
	ok := true
	switch string(key) {
	case "address":
		l.Address = optAddress{}
		if !null {
			l.Address.set, ok = true, s.fixed(l.Address.v[:])
		}
	case "topics":
		l.Topics = nil
		if !null {
			l.Topics, ok = s.topics()
		}
	case "data":
		l.Data = optBytes{}
		if !null {
			l.Data.set = true
			l.Data.v, ok = s.bytes()
		}
	case "blockNumber":
		l.BlockNumber = optUint64{}
		if !null {
			l.BlockNumber.set = true
			l.BlockNumber.v, ok = s.quantity()
		}
	case "transactionHash":
		ok = s.optHash(&l.TxHash, null)
	case "blockHash":
		ok = s.optHash(&l.BlockHash, null)
	case "transactionIndex":
		ok = s.optUint(&l.TxIndex, null)
	case "logIndex":
		ok = s.optUint(&l.Index, null)
	case "removed":
		switch {
		case null:
			l.Removed = nil
		case s.word("true"):
			l.Removed = s.flag(true)
		case s.word("false"):
			l.Removed = s.flag(false)
		default:
			ok = false
		}
	}
	return ok
}

// optHash reads a hash into f, which null leaves absent.
func (s *scanner) optHash(f *optHash, null bool) bool {
	*f = optHash{}
	if null {
		return true
	}
	f.set = true
	return s.fixed(f.v[:])
}

// optUint reads a quantity that fits a uint into f, which null leaves
// absent.
func (s *scanner) optUint(f *optUint, null bool) bool {
	*f = optUint{}
	if null {
		return true
	}
	v, ok := s.uintQuantity()
	*f = optUint{v: v, set: true}
	return ok
}

// receipts reads an eth_getBlockReceipts result.
func (s *scanner) receipts() ([]rpcReceipt, bool) {
	return array(s, s.receipt)
}

// receiptOrNull reads an eth_getTransactionReceipt result: null for a
// transaction the node does not know.
func (s *scanner) receiptOrNull() (*rpcReceipt, bool) {
	if s.word("null") {
		return nil, true
	}
	r := new(rpcReceipt)
	return r, s.receipt(r)
}

// receipt reads one receipt as rpcReceipt's decoder does: null leaves a
// field nil, and a key given twice takes its last value.
func (s *scanner) receipt(r *rpcReceipt) bool {
	logs := false
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "transactionHash", "blockHash", "status", "logs":
		default:
			return s.other(key, receiptKeys)
		}
		null := s.word("null")
		ok := true
		switch string(key) {
		case "transactionHash":
			r.TxHash = nil
			if !null {
				r.TxHash = new(common.Hash)
				ok = s.fixed(r.TxHash[:])
			}
		case "blockHash":
			r.BlockHash = nil
			if !null {
				r.BlockHash = new(common.Hash)
				ok = s.fixed(r.BlockHash[:])
			}
		case "status":
			r.Status = nil
			if !null {
				r.Status = new(hexutil.Uint64)
				*r.Status, ok = s.quantity()
			}
		case "logs":
			if logs {
				// Given twice: encoding/json decodes the second array into
				// the first's logs, merging them; it decides.
				return false
			}
			logs = true
			r.Logs = nil
			if !null {
				r.Logs, ok = s.logs()
			}
		}
		return ok
	})
}
