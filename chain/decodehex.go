package chain

import (
	"encoding/hex"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

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
