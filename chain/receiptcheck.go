package chain

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// The node faults an Observer hears of (FaultObserver.NodeFault).
const (
	// FaultUnconfirmedBurn: a burn in the eth_getLogs reply that its
	// transaction's receipt does not hold as replied, or whose transaction
	// failed. It is never credited; the reply is a bad one.
	FaultUnconfirmedBurn = "unconfirmed_burn"
	// FaultHiddenBurn: a burn the receipts hold that the eth_getLogs reply
	// left out. It is recorded, from the receipt.
	FaultHiddenBurn = "hidden_burn"
)

// FaultObserver hears of replies that receipts contradicted. poller.Metrics
// is the real one; an Observer without it hears them as bad replies only.
type FaultObserver interface {
	NodeFault(endpoint, kind string, n int)
}

// receiptCheck is what a range's receipts are read for: blocks, in order,
// each asked by number, with the hash its header gives (a range end) or,
// for a block known only by its logs, none until its receipts give it;
// and the reply's logs by block.
type receiptCheck struct {
	blocks []Header
	logs   map[uint64][]types.Log
	verify bool
}

// receiptBlocks chooses the blocks whose receipts confirm the reply logs:
// with verify, every block holding a log; and every block whose header
// (ends, the headers the range already holds) has a bloom that may hold a
// burn of contracts though the reply has none there.
func receiptBlocks(logs []types.Log, contracts []common.Address, ends map[uint64]Header, verify bool) receiptCheck {
	check := receiptCheck{logs: map[uint64][]types.Log{}, verify: verify}
	for start := 0; start < len(logs); {
		// A node gives logs in chain order: each block's are a run of the
		// reply, shared rather than copied (a dense range's are megabytes).
		n, end := logs[start].BlockNumber, start+1
		for end < len(logs) && logs[end].BlockNumber == n {
			end++
		}
		if held, ok := check.logs[n]; ok {
			check.logs[n] = append(held[:len(held):len(held)], logs[start:end]...)
		} else {
			check.logs[n] = logs[start:end:end]
		}
		start = end
	}
	if verify {
		for n := range check.logs {
			h := ends[n] // its transactions, when the range holds its header
			h.Number = n
			check.blocks = append(check.blocks, h)
		}
	}
	for n, h := range ends {
		if _, has := check.logs[n]; !has && bloomHolds(h.Bloom, contracts) {
			check.blocks = append(check.blocks, h)
		}
	}
	slices.SortFunc(check.blocks, func(a, b Header) int { return cmp.Compare(a.Number, b.Number) })
	return check
}

// crossCheck confirms the reply r (logs as the node gave them, validated,
// each in the block the node calls canonical) against the receipts read
// for check. With check.verify, every log must be in its transaction's
// receipt exactly as replied (address, topics, data, index, block hash)
// with a successful status, or the reply is a bad one. A burn the receipts
// hold and the reply left out (a block chosen for its bloom) is added to r
// (hidden); it counts as a node fault.
func (c *Client) crossCheck(r *Range, check receiptCheck, receipts map[uint64][]rpcReceipt, contracts []common.Address) error {
	var hidden []types.Log
	for _, h := range check.blocks {
		got, err := burnsInReceipts(receipts[h.Number], h, contracts)
		if err != nil {
			return c.badReply("eth_getBlockReceipts", err)
		}
		replied := check.logs[h.Number]
		inReceipts := make(map[logKey]*types.Log, len(got))
		for i := range got {
			inReceipts[logKey{got[i].TxHash, got[i].Index}] = &got[i]
		}
		inReply := make(map[logKey]bool, len(replied))
		for _, l := range replied {
			inReply[logKey{l.TxHash, l.Index}] = true
			if !check.verify {
				continue
			}
			if err := confirmed(l, inReceipts[logKey{l.TxHash, l.Index}]); err != nil {
				c.fault(FaultUnconfirmedBurn, 1)
				return c.badReply("eth_getLogs", err)
			}
		}
		for _, l := range got {
			if !inReply[logKey{l.TxHash, l.Index}] {
				hidden = append(hidden, l)
			}
		}
	}
	if len(hidden) == 0 {
		return nil
	}
	burns, rejected, err := ValidateLogs(hidden, contracts, r.From.Number, r.To.Number)
	if err != nil {
		return c.badReply("eth_getBlockReceipts", err)
	}
	c.fault(FaultHiddenBurn, len(hidden))
	r.Hidden += len(hidden)
	r.Burns = append(r.Burns, burns...)
	r.Rejected = append(r.Rejected, rejected...)
	sortBurns(r.Burns)
	return nil
}

// sortBurns puts burns in chain order: by block, then log index.
func sortBurns(burns []Burn) {
	slices.SortFunc(burns, func(a, b Burn) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
}

func (c *Client) fault(kind string, n int) {
	if fo, ok := c.opts.Observer.(FaultObserver); ok {
		fo.NodeFault(c.display, kind, n)
	}
}

// bloomHolds says a block's logsBloom may hold a burn of one of contracts:
// the burn topic and one of the addresses. An empty bloom holds nothing.
func bloomHolds(b types.Bloom, contracts []common.Address) bool {
	if b == (types.Bloom{}) || !types.BloomLookup(b, BurnTopic) {
		return false
	}
	return slices.ContainsFunc(contracts, func(a common.Address) bool { return types.BloomLookup(b, a) })
}

// burnsInReceipts returns the burn-event logs of contracts in a block's
// receipts, after checking that every receipt is of that block. Logs of
// failed transactions are dropped: the chain discards them.
func burnsInReceipts(rs []rpcReceipt, h Header, contracts []common.Address) ([]types.Log, error) {
	var out []types.Log
	for _, rc := range rs {
		if rc.BlockHash != h.Hash {
			return nil, fmt.Errorf("%w: receipt of tx %s has block hash %s, canonical block %d has %s",
				ErrBadReply, rc.TxHash.Hex(), rc.BlockHash.Hex(), h.Number, h.Hash.Hex())
		}
		if rc.Status != types.ReceiptStatusSuccessful {
			continue
		}
		for _, l := range rc.Logs {
			if len(l.Topics) == 0 || l.Topics[0] != BurnTopic || !slices.Contains(contracts, l.Address) {
				continue
			}
			if l.TxHash != rc.TxHash || l.BlockHash != h.Hash || l.BlockNumber != h.Number {
				return nil, fmt.Errorf("%w: a log in the receipt of tx %s names tx %s in block %d (%s)",
					ErrBadReply, rc.TxHash.Hex(), l.TxHash.Hex(), l.BlockNumber, l.BlockHash.Hex())
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// confirmed returns nil when rl, the receipts' log at l's position (nil
// when there is none), is l exactly.
func confirmed(l types.Log, rl *types.Log) error {
	if rl == nil {
		return fmt.Errorf("%w: log %d of tx %s in block %d is not in the transaction's receipt, or the transaction failed",
			ErrBadReply, l.Index, l.TxHash.Hex(), l.BlockNumber)
	}
	if rl.Address != l.Address || !slices.Equal(rl.Topics, l.Topics) || !slices.Equal(rl.Data, l.Data) || rl.BlockHash != l.BlockHash {
		return fmt.Errorf("%w: log %d of tx %s differs from the one in its receipt", ErrBadReply, l.Index, l.TxHash.Hex())
	}
	return nil
}

// hashesFromReceipts gives each block of check known only by its logs the
// hash its receipts carry, which they must all agree on and which must be
// the hash its logs name (a block asked by number answers with the
// canonical block's receipts), and makes it the block's canonical hash.
func (c *Client) hashesFromReceipts(check *receiptCheck, receipts map[uint64][]rpcReceipt, canonical map[uint64]Header) error {
	for i, h := range check.blocks {
		if h.Hash != (common.Hash{}) {
			continue
		}
		rs, named := receipts[h.Number], check.logs[h.Number]
		if len(rs) == 0 && len(named) > 0 {
			// No receipt confirms the block's logs: crossCheck refuses
			// them as unconfirmed burns. The hash they name stands until
			// then.
			check.blocks[i].Hash = named[0].BlockHash
			canonical[h.Number] = Header{Number: h.Number, Hash: named[0].BlockHash}
			continue
		}
		var hash common.Hash
		for _, rc := range rs {
			if hash != (common.Hash{}) && rc.BlockHash != hash {
				return c.badReply("eth_getBlockReceipts", fmt.Errorf("%w: the receipts of block %d name blocks %s and %s",
					ErrBadReply, h.Number, hash.Hex(), rc.BlockHash.Hex()))
			}
			hash = rc.BlockHash
		}
		if len(named) > 0 && named[0].BlockHash != hash {
			return c.badReply("eth_getBlockReceipts", fmt.Errorf("%w: the receipts of block %d are of block %s, its logs name %s",
				ErrBadReply, h.Number, hash.Hex(), named[0].BlockHash.Hex()))
		}
		check.blocks[i].Hash = hash
		canonical[h.Number] = Header{Number: h.Number, Hash: hash}
	}
	return nil
}
