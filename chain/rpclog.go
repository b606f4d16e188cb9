package chain

import (
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// rpcLog is a log as a node sends it (eth_getLogs, receipts), decoded in
// one pass. types.Log's own decoder decodes each log a second time, into an
// intermediate struct, which made log decoding the poller's largest cost on
// dense ranges. The same fields are required as there: address, topics,
// data and transactionHash.
type rpcLog struct {
	Address     optAddress    `json:"address"`
	Topics      []common.Hash `json:"topics"`
	Data        optBytes      `json:"data"`
	BlockNumber optUint64     `json:"blockNumber"`
	TxHash      optHash       `json:"transactionHash"`
	TxIndex     optUint       `json:"transactionIndex"`
	BlockHash   optHash       `json:"blockHash"`
	Index       optUint       `json:"logIndex"`
	Removed     *bool         `json:"removed"`
}

// The fields a reply may lack (or send as null): set says one was there.
// Each value decodes in place, without an allocation of its own; they are
// distinct named types rather than one generic one, whose long type name
// encoding/json reads for every field.
type (
	optAddress struct {
		v   common.Address
		set bool
	}
	optHash struct {
		v   common.Hash
		set bool
	}
	optBytes struct {
		v   hexutil.Bytes
		set bool
	}
	optUint64 struct {
		v   hexutil.Uint64
		set bool
	}
	optUint struct {
		v   hexutil.Uint
		set bool
	}
)

// UnmarshalJSON decodes an address; null leaves it absent.
func (f *optAddress) UnmarshalJSON(b []byte) error {
	return decodeOpt(b, &f.set, &f.v)
}

// UnmarshalJSON decodes a hash; null leaves it absent.
func (f *optHash) UnmarshalJSON(b []byte) error {
	return decodeOpt(b, &f.set, &f.v)
}

// UnmarshalJSON decodes hex bytes; null leaves them absent.
func (f *optBytes) UnmarshalJSON(b []byte) error {
	return decodeOpt(b, &f.set, &f.v)
}

// UnmarshalJSON decodes a hex quantity; null leaves it absent.
func (f *optUint64) UnmarshalJSON(b []byte) error {
	return decodeOpt(b, &f.set, &f.v)
}

// UnmarshalJSON decodes a hex quantity; null leaves it absent.
func (f *optUint) UnmarshalJSON(b []byte) error {
	return decodeOpt(b, &f.set, &f.v)
}

// decodeOpt decodes b into v, unless b is null (an absent field). It
// resets the field first: a key repeated with null leaves it absent, as it
// left a pointer nil.
func decodeOpt[T any, P interface {
	*T
	json.Unmarshaler
}](b []byte, set *bool, v *T) error {
	var zero T
	*v, *set = zero, false
	if string(b) == "null" {
		return nil
	}
	*set = true
	return P(v).UnmarshalJSON(b)
}

// toLogs converts raw logs, each of which must carry the required fields.
func toLogs(raw []rpcLog) ([]types.Log, error) {
	out := make([]types.Log, len(raw))
	for i := range raw {
		r := &raw[i]
		var missing string
		switch {
		case !r.Address.set:
			missing = "address"
		case r.Topics == nil:
			missing = "topics"
		case !r.Data.set:
			missing = "data"
		case !r.TxHash.set:
			missing = "transactionHash"
		}
		if missing != "" {
			return nil, fmt.Errorf("%w: log %d of the reply lacks %s", ErrBadReply, i, missing)
		}
		l := types.Log{Address: r.Address.v, Topics: r.Topics, Data: r.Data.v, TxHash: r.TxHash.v,
			TxIndex: uint(r.TxIndex.v), BlockHash: r.BlockHash.v, Index: uint(r.Index.v)}
		if r.BlockNumber.v > MaxBlock {
			return nil, fmt.Errorf("%w: log %d of the reply is in block %d, out of range", ErrBadReply, i, uint64(r.BlockNumber.v))
		}
		l.BlockNumber = uint64(r.BlockNumber.v)
		if r.Removed != nil {
			l.Removed = *r.Removed
		}
		out[i] = l
	}
	return out, nil
}
