package payments

import (
	"fmt"
	"math"
	"time"
)

// columns are burns as the column arrays an unnest() insert takes, in the
// order args gives them: chain_id, contract, tx_hash, log_index,
// block_number, block_hash, payer, digest, amount (decimal text, cast by
// Postgres to numeric: exact at any size), burned_at.
type columns struct {
	chainIDs, indexes, numbers                            []int64
	contracts, txHashes, hashes, payers, digests, amounts []string
	times                                                 []time.Time
}

func newColumns(n int) *columns {
	return &columns{
		chainIDs: make([]int64, 0, n), indexes: make([]int64, 0, n), numbers: make([]int64, 0, n),
		contracts: make([]string, 0, n), txHashes: make([]string, 0, n), hashes: make([]string, 0, n),
		payers: make([]string, 0, n), digests: make([]string, 0, n), amounts: make([]string, 0, n),
		times: make([]time.Time, 0, n),
	}
}

// add appends p, named what in an error, if storable.
func (c *columns) add(what string, p Payment) error {
	if err := storable(what, p); err != nil {
		return err
	}
	c.chainIDs, c.contracts, c.txHashes = append(c.chainIDs, int64(p.ChainID)), append(c.contracts, p.Contract), append(c.txHashes, p.TxHash)
	c.indexes, c.numbers, c.hashes = append(c.indexes, int64(p.LogIndex)), append(c.numbers, p.BlockNumber), append(c.hashes, p.BlockHash)
	c.payers, c.digests, c.amounts = append(c.payers, p.Payer), append(c.digests, p.Digest), append(c.amounts, p.Amount.String())
	c.times = append(c.times, p.BurnedAt)
	return nil
}

// args are the arrays, in their order.
func (c *columns) args() []any {
	return []any{c.chainIDs, c.contracts, c.txHashes, c.indexes, c.numbers, c.hashes, c.payers, c.digests, c.amounts, c.times}
}

// storable says whether p, named what in an error, can be stored: its
// amount must be a uint256, its chain id a bigint, its log index an
// integer.
func storable(what string, p Payment) error {
	if p.Amount == nil || p.Amount.Sign() < 0 {
		return fmt.Errorf("%s %s/%d: amount %v is not a uint256", what, p.TxHash, p.LogIndex, p.Amount)
	}
	if p.ChainID > 1<<63-1 {
		return fmt.Errorf("%s %s/%d: chain id %d out of range", what, p.TxHash, p.LogIndex, p.ChainID)
	}
	if p.LogIndex > math.MaxInt32 {
		return fmt.Errorf("%s %s/%d: log index out of range", what, p.TxHash, p.LogIndex)
	}
	return nil
}
