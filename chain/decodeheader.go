package chain

import (
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

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
