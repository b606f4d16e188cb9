package chain

import (
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// rpcLog is a log as a node sends it (eth_getLogs, receipts), as the
// reply reader finds its fields (readLog): a field a reply may lack (or
// send as null) says whether it was there. It becomes a types.Log once
// checked (toLog).
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

// toLog is log i of a reply as a types.Log, if it can be one: it has the
// fields go-ethereum's own decoder requires (address, topics, data and
// transactionHash), at most maxTopics topics, and a block number up to
// MaxBlock.
func (r *rpcLog) toLog(i int) (types.Log, error) {
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
		return types.Log{}, fmt.Errorf("%w: log %d of the reply lacks %s", ErrBadReply, i, missing)
	}
	if len(r.Topics) > maxTopics {
		return types.Log{}, fmt.Errorf("%w: log %d of the reply has %d topics, more than a log has", ErrBadReply, i, len(r.Topics))
	}
	if r.BlockNumber.v > MaxBlock {
		return types.Log{}, fmt.Errorf("%w: log %d of the reply is in block %d, out of range", ErrBadReply, i, uint64(r.BlockNumber.v))
	}
	l := types.Log{Address: r.Address.v, Topics: r.Topics, Data: r.Data.v, BlockNumber: uint64(r.BlockNumber.v), TxHash: r.TxHash.v,
		TxIndex: uint(r.TxIndex.v), BlockHash: r.BlockHash.v, Index: uint(r.Index.v)}
	if r.Removed != nil {
		l.Removed = *r.Removed
	}
	return l, nil
}
