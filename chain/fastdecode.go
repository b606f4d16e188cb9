package chain

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
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

// grower builds a slice element by element in blocks, then copies it once
// to its length: append grows a large slice by a quarter at a time,
// allocating up to five times its final size; this allocates twice it.
type grower[T any] struct {
	done [][]T
	cur  []T
	n    int
}

// growerBlock is the most elements of one block.
const growerBlock = 256

// add returns a new element, zero.
func (g *grower[T]) add() *T {
	if len(g.cur) == cap(g.cur) {
		if g.cur != nil {
			g.done = append(g.done, g.cur)
		}
		g.cur = make([]T, 0, min(max(2*cap(g.cur), 1), growerBlock))
	}
	g.cur = g.cur[:len(g.cur)+1]
	g.n++
	var zero T
	g.cur[len(g.cur)-1] = zero
	return &g.cur[len(g.cur)-1]
}

// drop takes back the element add returned last.
func (g *grower[T]) drop() {
	g.cur = g.cur[:len(g.cur)-1]
	g.n--
}

// slice is the elements added: an empty one, not nil, if none.
func (g *grower[T]) slice() []T {
	switch {
	case g.cur == nil:
		return []T{}
	case len(g.done) == 0:
		return g.cur[:len(g.cur):len(g.cur)]
	}
	out := make([]T, 0, g.n)
	for _, b := range g.done {
		out = append(out, b...)
	}
	return append(out, g.cur...)
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

// hexText reads a string of at most max bytes without escapes, the text
// hexutil decodes (escapes are never hex: hexutil refuses them, as it
// gets a string's JSON), and returns it; else it refuses the value, which
// it reads all the same.
func (d *replyReader) hexText(what string, max int) ([]byte, error, error) {
	if c, ok := d.peek(); !ok || c != '"' {
		if !ok {
			return nil, nil, d.syntax(what)
		}
		return nil, refuse("%s is not a string", what), d.skip()
	}
	raw, escaped, over, err := d.str(max)
	switch {
	case err != nil:
		return nil, nil, err
	case escaped || over:
		return nil, refuse("%s is not hex", what), nil
	}
	return raw, nil, nil
}

// fixed reads a hex string of len(out) bytes (a hash, an address) into out.
func (d *replyReader) fixed(what string, out []byte) (refused, err error) {
	raw, refused, err := d.hexText(what, 2+2*len(out))
	if refused != nil || err != nil {
		return refused, err
	}
	if hexutil.UnmarshalFixedText("", raw, out) != nil {
		return refuse("%s is not %d bytes of hex", what, len(out)), nil
	}
	return nil, nil
}

// quantity reads a hex quantity of at most 64 bits.
func (d *replyReader) quantity(what string) (uint64, error, error) {
	raw, refused, err := d.hexText(what, 18)
	if refused != nil || err != nil {
		return 0, refused, err
	}
	var q hexutil.Uint64
	if q.UnmarshalText(raw) != nil {
		return 0, refuse("%s is not a quantity", what), nil
	}
	return uint64(q), nil, nil
}

// hashBlock and dataBlock are the largest blocks decoded hashes and data
// are cut from: a reply's first blocks are smaller, so that a small reply
// costs little.
const (
	maxHashBlock = 512
	maxDataBlock = 32 << 10
)

// blockMark is where the reader's blocks of hashes and data are: cutting
// goes on from there.
type blockMark struct{ hashGen, hashLen, dataGen, dataLen int }

// mark is where the reader's blocks are now.
func (d *replyReader) mark() blockMark {
	return blockMark{d.hashGen, len(d.hashBlock), d.dataGen, len(d.dataBlock)}
}

// reclaim gives back what was cut from the reader's blocks since m (the
// topics and data of a log not kept), the next cuts reusing it.
func (d *replyReader) reclaim(m blockMark) {
	if d.hashGen == m.hashGen {
		d.hashBlock = d.hashBlock[:m.hashLen]
	} else {
		d.hashBlock = d.hashBlock[:0] // a block begun since: all of it
	}
	if d.dataGen == m.dataGen {
		d.dataBlock = d.dataBlock[:m.dataLen]
	} else {
		d.dataBlock = d.dataBlock[:0]
	}
}

// hashes returns n hashes cut from the reader's block.
func (d *replyReader) hashes(n int) []common.Hash {
	if cap(d.hashBlock)-len(d.hashBlock) < n {
		d.hashBlock = make([]common.Hash, 0, max(min(2*cap(d.hashBlock), maxHashBlock), n, 4))
		d.hashGen++
	}
	l := len(d.hashBlock)
	d.hashBlock = d.hashBlock[:l+n]
	return d.hashBlock[l : l+n : l+n]
}

// bytes returns n bytes cut from the reader's block, or of their own when
// many.
func (d *replyReader) bytes(n int) []byte {
	if n > maxDataBlock/4 {
		return make([]byte, n)
	}
	if cap(d.dataBlock)-len(d.dataBlock) < n {
		d.dataBlock = make([]byte, 0, max(min(2*cap(d.dataBlock), maxDataBlock), 256, n))
		d.dataGen++
	}
	l := len(d.dataBlock)
	d.dataBlock = d.dataBlock[:l+n]
	return d.dataBlock[l : l+n : l+n]
}

// readLogs reads an eth_getLogs result into p.
func (d *replyReader) readLogs(p *[]types.Log) (refused, err error) {
	var g grower[types.Log]
	null, refused, err := d.readArray("the result", func(i int) (error, error) {
		return d.readLog(i, g.add())
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	*p = g.slice()
	return nil, nil
}

// The fields of a log, as rpcLog names them, in the order of logField.
var logFields = []string{"address", "topics", "data", "blockNumber", "transactionHash", "transactionIndex", "blockHash", "logIndex", "removed"}

// removedValues are what a log's Removed points to.
var removedValues = [2]bool{false, true}

// readLog reads log i of a result or a receipt into out: an object with
// the fields a log must have (rpcLog.toLog).
func (d *replyReader) readLog(i int, out *types.Log) (refused, err error) {
	var l rpcLog
	null, refused, err := d.readObject("a log", func(key []byte) (error, error) {
		f := logField(key)
		if f < 0 {
			return nil, d.skip()
		}
		null, err := d.null()
		if err != nil || null {
			l.clear(f)
			return nil, err
		}
		return d.readLogField(&l, f)
	})
	switch {
	case err != nil:
		return nil, err
	case refused != nil:
		return fmt.Errorf("log %d of the reply: %w", i, refused), nil
	case null:
		return refuse("log %d of the reply is null", i), nil
	}
	*out, refused = l.toLog(i)
	return refused, nil
}

// logField is the index in logFields of key's field, or -1.
func logField(key []byte) int {
	switch string(key) { // as nodes spell them: at once
	case "address":
		return 0
	case "topics":
		return 1
	case "data":
		return 2
	case "blockNumber":
		return 3
	case "transactionHash":
		return 4
	case "transactionIndex":
		return 5
	case "blockHash":
		return 6
	case "logIndex":
		return 7
	case "removed":
		return 8
	}
	return field(key, logFields)
}

// clear leaves field f (logField) of l absent, as null does.
func (l *rpcLog) clear(f int) {
	switch f {
	case 0:
		l.Address = optAddress{}
	case 1:
		l.Topics = nil
	case 2:
		l.Data = optBytes{}
	case 3:
		l.BlockNumber = optUint64{}
	case 4:
		l.TxHash = optHash{}
	case 5:
		l.TxIndex = optUint{}
	case 6:
		l.BlockHash = optHash{}
	case 7:
		l.Index = optUint{}
	case 8:
		l.Removed = nil
	}
}

// readLogField reads the value of field f (logField) of l, not null.
func (d *replyReader) readLogField(l *rpcLog, f int) (refused, err error) {
	l.clear(f)
	switch f {
	case 0:
		l.Address.set = true
		return d.fixed("address", l.Address.v[:])
	case 1:
		return d.readTopics(l)
	case 2:
		l.Data.set = true
		l.Data.v, refused, err = d.hexBytes("data")
		return refused, err
	case 3:
		l.BlockNumber.set = true
		var v uint64
		v, refused, err = d.quantity("blockNumber")
		l.BlockNumber.v = hexutil.Uint64(v)
		return refused, err
	case 4:
		l.TxHash.set = true
		return d.fixed("transactionHash", l.TxHash.v[:])
	case 5:
		l.TxIndex.set = true
		var v uint64
		v, refused, err = d.quantity("transactionIndex")
		l.TxIndex.v = hexutil.Uint(v)
		return refused, err
	case 6:
		l.BlockHash.set = true
		return d.fixed("blockHash", l.BlockHash.v[:])
	case 7:
		l.Index.set = true
		var v uint64
		v, refused, err = d.quantity("logIndex")
		l.Index.v = hexutil.Uint(v)
		return refused, err
	default:
		c, ok := d.peek()
		switch {
		case ok && c == 't':
			l.Removed = &removedValues[1]
			return nil, d.word("true")
		case ok && c == 'f':
			l.Removed = &removedValues[0]
			return nil, d.word("false")
		}
		return refuse("removed is not true or false"), d.skip()
	}
}

// maxTopics is the most topics a log has (LOG0 to LOG4).
const maxTopics = 4

// readTopics reads a log's topics, an array of at most maxTopics hashes.
func (d *replyReader) readTopics(l *rpcLog) (refused, err error) {
	var got [maxTopics]common.Hash
	n := 0
	null, refused, err := d.readArray("topics", func(i int) (error, error) {
		if i == maxTopics {
			return refuse("more than %d topics", maxTopics), d.skip()
		}
		n++
		return d.fixed("a topic", got[i][:])
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	l.Topics = []common.Hash{} // present, and empty: not nil
	if n > 0 {
		l.Topics = d.hashes(n)
		copy(l.Topics, got[:n])
	}
	return nil, nil
}

// hexBytes reads a hex string of any even length (hexutil.Bytes), cut
// from the reader's block.
func (d *replyReader) hexBytes(what string) ([]byte, error, error) {
	raw, refused, err := d.hexText(what, -1)
	if refused != nil || err != nil {
		return nil, refused, err
	}
	switch {
	case len(raw) == 0 || len(raw) == 2 && raw[0] == '0' && (raw[1] == 'x' || raw[1] == 'X'):
		return []byte{}, nil, nil // no bytes ("" too, as hexutil takes it)
	case len(raw) < 2 || raw[0] != '0' || (raw[1] != 'x' && raw[1] != 'X') || len(raw)%2 != 0:
		return nil, refuse("%s is not hex", what), nil
	}
	out := d.bytes((len(raw) - 2) / 2)
	if _, err := hex.Decode(out, raw[2:]); err != nil {
		return nil, refuse("%s is not hex", what), nil
	}
	return out, nil, nil
}

// readReceipts reads an eth_getBlockReceipts result into p.
func (d *replyReader) readReceipts(p *[]rpcReceipt) (refused, err error) {
	var g grower[rpcReceipt]
	null, refused, err := d.readArray("the result", func(i int) (error, error) {
		null, refused, err := d.readReceipt(g.add())
		if refused == nil && null {
			refused = refuse("null")
		}
		if refused != nil {
			refused = fmt.Errorf("receipt %d of the reply: %w", i, refused)
		}
		return refused, err
	})
	if refused != nil || err != nil || null {
		return refused, err
	}
	*p = g.slice()
	return nil, nil
}

// readReceiptOrNull reads an eth_getTransactionReceipt result into p:
// null for a transaction the node does not know.
func (d *replyReader) readReceiptOrNull(p **rpcReceipt) (refused, err error) {
	r := new(rpcReceipt)
	null, refused, err := d.readReceipt(r)
	if refused != nil || err != nil || null {
		if refused != nil {
			refused = fmt.Errorf("the receipt: %w", refused)
		}
		return refused, err
	}
	*p = r
	return nil, nil
}

// The fields of a receipt, as rpcReceipt names them.
var receiptFields = []string{"transactionHash", "blockHash", "status", "logs"}

// readReceipt reads a receipt into r: an object with a transaction hash,
// a block hash and a status, and logs (rpcLog.toLog) given once, of which
// it keeps the burn-event ones (rpcReceipt). null is no receipt.
func (d *replyReader) readReceipt(r *rpcReceipt) (null bool, refused, err error) {
	var has [3]bool
	logs := false
	null, refused, err = d.readObject("a receipt", func(key []byte) (error, error) {
		f := field(key, receiptFields)
		if f < 0 {
			return nil, d.skip()
		}
		if f == 3 && logs {
			// encoding/json would decode the second array into the first's
			// logs, merging the two: no node sends that.
			return refuse("logs given twice"), d.skip()
		}
		null, err := d.null()
		if err != nil {
			return nil, err
		}
		if f < 3 {
			has[f] = !null
		}
		switch {
		case null && f == 3:
			logs, r.Logs = true, nil
			return nil, nil
		case null:
			return nil, nil
		case f == 0:
			return d.fixed("transactionHash", r.TxHash[:])
		case f == 1:
			return d.fixed("blockHash", r.BlockHash[:])
		case f == 2:
			r.Status, refused, err = d.quantity("status")
			return refused, err
		}
		logs = true
		var g grower[types.Log]
		null, refused, err := d.readArray("logs", func(i int) (error, error) {
			m, l := d.mark(), g.add()
			refused, err := d.readLog(i, l)
			if refused == nil && err == nil && (len(l.Topics) == 0 || l.Topics[0] != BurnTopic) {
				// Checked, and of no use to the cross-check: not kept
				// (rpcReceipt).
				g.drop()
				d.reclaim(m)
			}
			return refused, err
		})
		if refused == nil && err == nil && !null {
			r.Logs = g.slice()
		}
		return refused, err
	})
	if refused != nil || err != nil || null {
		return null, refused, err
	}
	for f, ok := range has {
		if !ok {
			return false, refuse("it lacks %s", receiptFields[f]), nil
		}
	}
	return false, nil, nil
}

// readHeaderOrNull reads a block (eth_getBlockByNumber, without its
// transactions in full) into p: null for a block the node does not have.
// A field given twice takes its last value, built once the block is read.
func (d *replyReader) readHeaderOrNull(p **rpcHeader) (refused, err error) {
	var b blockFields
	null, refused, err := d.readObject("the block", func(key []byte) (error, error) {
		f := field(key, headerFields)
		if f < 0 {
			return nil, d.skip()
		}
		null, err := d.null()
		if err != nil {
			return nil, err
		}
		b.set[f] = !null
		if null {
			if f == 5 {
				b.txs = nil
			}
			return nil, nil
		}
		return d.readBlockField(&b, f)
	})
	if refused != nil || err != nil || null {
		if refused != nil {
			refused = fmt.Errorf("the block: %w", refused)
		}
		return refused, err
	}
	*p = b.header()
	return nil, nil
}

// The fields of a block, as rpcHeader names them.
var headerFields = []string{"number", "hash", "parentHash", "timestamp", "logsBloom", "transactions"}

// blockFields are a block's fields as read so far: set says which hold a
// value (the last given), not null.
type blockFields struct {
	set          [6]bool
	number       []byte // its text, checked
	numberText   [66]byte
	hash, parent common.Hash
	timestamp    hexutil.Uint64
	bloom        types.Bloom
	txs          []common.Hash
}

// header is the block read, as rpcHeader.
func (b *blockFields) header() *rpcHeader {
	h := new(rpcHeader)
	if b.set[0] {
		h.Number = new(hexutil.Big)
		_ = h.Number.UnmarshalText(b.number) // checked as read (bigText)
	}
	if b.set[1] {
		h.Hash = &b.hash
	}
	if b.set[2] {
		h.ParentHash = &b.parent
	}
	if b.set[3] {
		h.Timestamp = &b.timestamp
	}
	if b.set[4] {
		h.LogsBloom = &b.bloom
	}
	if b.set[5] {
		h.Transactions = b.txs
	}
	return h
}

// readBlockField reads the value of field f (headerFields) of b, not null.
func (d *replyReader) readBlockField(b *blockFields, f int) (refused, err error) {
	switch f {
	case 0:
		raw, refused, err := d.hexText("number", len(b.numberText))
		if refused != nil || err != nil {
			return refused, err
		}
		if !bigText(raw) {
			return refuse("number is not a quantity"), nil
		}
		b.number = append(b.numberText[:0], raw...)
		return nil, nil
	case 1:
		return d.fixed("hash", b.hash[:])
	case 2:
		return d.fixed("parentHash", b.parent[:])
	case 3:
		v, refused, err := d.quantity("timestamp")
		b.timestamp = hexutil.Uint64(v)
		return refused, err
	case 4:
		return d.readBloom(&b.bloom)
	}
	var g grower[common.Hash]
	_, refused, err = d.readArray("transactions", func(int) (error, error) { return d.fixed("a transaction hash", g.add()[:]) })
	if refused == nil && err == nil {
		b.txs = g.slice()
	}
	return refused, err
}

// bigText says whether hexutil.Big takes text as a quantity: "", or 0x
// and at most 64 hex digits, without a leading zero.
func bigText(text []byte) bool {
	if len(text) == 0 {
		return true
	}
	if len(text) < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X') || len(text) > 66 || (len(text) > 3 && text[2] == '0') {
		return false
	}
	for _, c := range text[2:] {
		if unhex(c) < 0 {
			return false
		}
	}
	return true
}

// readBloom reads a block's logsBloom into b. A types.Bloom decodes a
// string's text, its escapes decoded (encoding/json hands it over
// unquoted), where hexutil's types decode its JSON.
func (d *replyReader) readBloom(b *types.Bloom) (refused, err error) {
	const size = 2 + 2*types.BloomByteLength
	c, ok := d.peek()
	switch {
	case !ok:
		return nil, d.syntax("logsBloom")
	case c != '"':
		return refuse("logsBloom is not a string"), d.skip()
	}
	raw, escaped, over, err := d.str(6 * size) // at most six bytes a byte, escaped
	switch {
	case err != nil:
		return nil, err
	case over:
		return refuse("logsBloom is not a bloom"), nil
	case escaped:
		quoted := newBytesReader([]byte{'"'}, raw, []byte{'"'})
		quoted.peek()
		text, total, err := quoted.text(size + 1)
		if err != nil || total > size {
			return refuse("logsBloom is not a bloom"), nil
		}
		raw = text
	}
	if b.UnmarshalText(raw) != nil {
		return refuse("logsBloom is not a bloom"), nil
	}
	return nil, nil
}
