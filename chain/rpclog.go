package chain

import (
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
	Address     *common.Address `json:"address"`
	Topics      []common.Hash   `json:"topics"`
	Data        *hexutil.Bytes  `json:"data"`
	BlockNumber *hexutil.Uint64 `json:"blockNumber"`
	TxHash      *common.Hash    `json:"transactionHash"`
	TxIndex     *hexutil.Uint   `json:"transactionIndex"`
	BlockHash   *common.Hash    `json:"blockHash"`
	Index       *hexutil.Uint   `json:"logIndex"`
	Removed     *bool           `json:"removed"`
}

// toLogs converts raw logs, each of which must carry the required fields.
func toLogs(raw []rpcLog) ([]types.Log, error) {
	out := make([]types.Log, len(raw))
	for i := range raw {
		r := &raw[i]
		var missing string
		switch {
		case r.Address == nil:
			missing = "address"
		case r.Topics == nil:
			missing = "topics"
		case r.Data == nil:
			missing = "data"
		case r.TxHash == nil:
			missing = "transactionHash"
		}
		if missing != "" {
			return nil, fmt.Errorf("%w: log %d of the reply lacks %s", ErrBadReply, i, missing)
		}
		l := types.Log{Address: *r.Address, Topics: r.Topics, Data: *r.Data, TxHash: *r.TxHash}
		if r.BlockNumber != nil {
			if *r.BlockNumber > MaxBlock {
				return nil, fmt.Errorf("%w: log %d of the reply is in block %d, out of range", ErrBadReply, i, uint64(*r.BlockNumber))
			}
			l.BlockNumber = uint64(*r.BlockNumber)
		}
		if r.TxIndex != nil {
			l.TxIndex = uint(*r.TxIndex)
		}
		if r.BlockHash != nil {
			l.BlockHash = *r.BlockHash
		}
		if r.Index != nil {
			l.Index = uint(*r.Index)
		}
		if r.Removed != nil {
			l.Removed = *r.Removed
		}
		out[i] = l
	}
	return out, nil
}
