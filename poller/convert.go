package poller

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// toPayments converts validated burns of chain chainID to ledger rows, in
// chain order: concurrent writers (a backfill beside the live loop) then take
// unique-index locks in the same order and cannot deadlock.
func toPayments(chainID uint64, burns []chain.Burn) ([]payments.Payment, error) {
	burns = slices.Clone(burns)
	slices.SortFunc(burns, func(a, b chain.Burn) int {
		return cmp.Or(cmp.Compare(a.BlockNumber, b.BlockNumber), cmp.Compare(a.LogIndex, b.LogIndex))
	})
	ps := make([]payments.Payment, len(burns))
	for i, b := range burns {
		if b.LogIndex > 1<<31-1 {
			return nil, fmt.Errorf("%w: burn in tx %s: log index %d out of range", chain.ErrBadReply, b.TxHash.Hex(), b.LogIndex)
		}
		ps[i] = payments.Payment{
			ChainID:     chainID,
			Contract:    lowerHex(b.Contract),
			TxHash:      b.TxHash.Hex(),
			LogIndex:    uint32(b.LogIndex),
			BlockNumber: ledgerBlock(b.BlockNumber),
			BlockHash:   b.BlockHash.Hex(),
			Payer:       lowerHex(b.Payer),
			Digest:      b.Digest.Hex(),
			Amount:      b.Amount,
			BurnedAt:    time.Unix(b.Timestamp, 0).UTC(),
		}
	}
	return ps, nil
}

// toRejected converts logs that did not decode to rejected_logs rows.
func toRejected(chainID uint64, rs []chain.Rejected) ([]payments.RejectedLog, error) {
	out := make([]payments.RejectedLog, len(rs))
	for i, r := range rs {
		raw, err := r.Log.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encoding rejected log: %w", err)
		}
		if r.Log.Index > 1<<31-1 {
			return nil, fmt.Errorf("%w: rejected log in tx %s: log index %d out of range", chain.ErrBadReply, r.Log.TxHash.Hex(), r.Log.Index)
		}
		out[i] = payments.RejectedLog{
			ChainID:     chainID,
			Contract:    lowerHex(r.Log.Address),
			TxHash:      r.Log.TxHash.Hex(),
			LogIndex:    uint32(r.Log.Index),
			BlockNumber: ledgerBlock(r.Log.BlockNumber),
			BlockHash:   r.Log.BlockHash.Hex(),
			Raw:         raw,
			Reason:      r.Reason,
		}
	}
	return out, nil
}

// Block numbers cross here, and only here, between chain, which counts
// them as the node does (uint64), and the ledger and this package, which
// count them as Postgres does (int64; a cursor at -1 has recorded nothing
// yet). chain hands out no number above chain.MaxBlock and asks are never
// below 0, so neither conversion can wrap.

// ledgerBlock is node block number n as the ledger counts it.
func ledgerBlock(n uint64) int64 { return int64(n) }

// nodeBlock is ledger block number n (n >= 0) as the node counts it.
func nodeBlock(n int64) uint64 { return uint64(n) }

// ends are the first and last blocks of r as the ledger counts them.
func ends(r chain.Range) (from, to int64) {
	return ledgerBlock(r.From.Number), ledgerBlock(r.To.Number)
}

// lowerHex is an address as the ledger stores it: lowercase 0x hex. (Hex()
// computes the EIP-55 checksum, a Keccak hash per call, only to lowercase it.)
func lowerHex(a common.Address) string { return hexutil.Encode(a[:]) }

// lowerHexes spells addresses as the ledger does.
func lowerHexes(as []common.Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = lowerHex(a)
	}
	return out
}

// hashHex is a hash as the ledger stores it.
func hashHex(h common.Hash) string { return h.Hex() }
