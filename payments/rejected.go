package payments

import (
	"context"
	"fmt"
)

// RejectedLog is a log of the burn event from the burn contract that did
// not decode: recorded, never credited.
type RejectedLog struct {
	ChainID     uint64
	Contract    string
	TxHash      string
	LogIndex    uint32
	BlockNumber int64
	BlockHash   string
	// Raw is the log as the node returned it, as JSON.
	Raw    []byte
	Reason string
}

// InsertRejected records rs in one statement, keeping the first sighting of
// each (chain_id, contract, tx_hash, log_index), and returns how many were
// new.
func (t *Tx) InsertRejected(ctx context.Context, rs []RejectedLog) (int64, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	var (
		chainIDs  = make([]int64, len(rs))
		contracts = make([]string, len(rs))
		txHashes  = make([]string, len(rs))
		indexes   = make([]int64, len(rs))
		numbers   = make([]int64, len(rs))
		hashes    = make([]string, len(rs))
		raws      = make([]string, len(rs))
		reasons   = make([]string, len(rs))
	)
	for i, r := range rs {
		if r.ChainID > 1<<63-1 {
			return 0, fmt.Errorf("rejected log %s/%d: chain id %d out of range", r.TxHash, r.LogIndex, r.ChainID)
		}
		chainIDs[i], contracts[i], txHashes[i] = int64(r.ChainID), r.Contract, r.TxHash
		indexes[i], numbers[i], hashes[i] = int64(r.LogIndex), r.BlockNumber, r.BlockHash
		raws[i], reasons[i] = string(r.Raw), r.Reason
	}
	tag, err := t.tx.Exec(ctx, `
		INSERT INTO rejected_logs (chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		SELECT chain_id, contract, tx_hash, log_index, block_number, block_hash, raw::jsonb, reason
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::bigint[], $6::text[], $7::text[], $8::text[])
		     AS r(chain_id, contract, tx_hash, log_index, block_number, block_hash, raw, reason)
		ON CONFLICT (chain_id, contract, tx_hash, log_index) DO NOTHING`,
		chainIDs, contracts, txHashes, indexes, numbers, hashes, raws, reasons)
	if err != nil {
		return 0, fmt.Errorf("recording %d rejected logs: %w", len(rs), interpret(err))
	}
	return tag.RowsAffected(), nil
}
