package chain

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// burnEventABI is the one event burnpoller reads, exactly as BurnWithDigest declares it.
const burnEventABI = `[{"anonymous":false,"type":"event","name":"LogBurnWithDigest","inputs":[
	{"indexed":true,"name":"payer","type":"address"},
	{"indexed":false,"name":"amount","type":"uint256"},
	{"indexed":true,"name":"digest","type":"bytes32"},
	{"indexed":false,"name":"timestamp","type":"uint256"}]}]`

var burnEvent = func() abi.Event {
	parsed, err := abi.JSON(strings.NewReader(burnEventABI))
	if err != nil {
		panic(fmt.Sprintf("parsing LogBurnWithDigest ABI: %v", err))
	}
	return parsed.Events["LogBurnWithDigest"]
}()

// BurnTopic is topic0 of LogBurnWithDigest(address,uint256,bytes32,uint256).
var BurnTopic = burnEvent.ID

// ErrInvalidLog marks a log that is not a well-formed LogBurnWithDigest.
var ErrInvalidLog = errors.New("invalid burn log")

// Burn is one decoded LogBurnWithDigest log with its position on the chain.
type Burn struct {
	Contract    common.Address
	TxHash      common.Hash
	LogIndex    uint
	BlockNumber uint64
	BlockHash   common.Hash
	Payer       common.Address
	Digest      common.Hash
	// Amount is the exact uint256 amount burned, in the token's smallest unit.
	Amount *big.Int
	// Timestamp is the event's timestamp field (block.timestamp), in Unix seconds.
	Timestamp int64
}

// DecodeBurn decodes a LogBurnWithDigest log. It checks the log's shape
// strictly (three topics, the event's topic0, a left-padded address topic and
// exactly two data words) and returns an error wrapping ErrInvalidLog for
// anything else. It does not check which contract emitted the log.
func DecodeBurn(l types.Log) (Burn, error) {
	if len(l.Topics) != 3 {
		return Burn{}, fmt.Errorf("%w: %d topics, want 3", ErrInvalidLog, len(l.Topics))
	}
	if l.Topics[0] != BurnTopic {
		return Burn{}, fmt.Errorf("%w: topic0 %s is not LogBurnWithDigest", ErrInvalidLog, l.Topics[0].Hex())
	}
	payerTopic := l.Topics[1]
	for _, b := range payerTopic[:common.HashLength-common.AddressLength] {
		if b != 0 {
			return Burn{}, fmt.Errorf("%w: payer topic %s is not an address", ErrInvalidLog, payerTopic.Hex())
		}
	}
	if len(l.Data) != 64 {
		return Burn{}, fmt.Errorf("%w: %d data bytes, want 64", ErrInvalidLog, len(l.Data))
	}
	values, err := burnEvent.Inputs.NonIndexed().Unpack(l.Data)
	if err != nil {
		return Burn{}, fmt.Errorf("%w: %w", ErrInvalidLog, err)
	}
	amount, ok := values[0].(*big.Int)
	if !ok {
		return Burn{}, fmt.Errorf("%w: amount decoded as %T", ErrInvalidLog, values[0])
	}
	ts, ok := values[1].(*big.Int)
	if !ok {
		return Burn{}, fmt.Errorf("%w: timestamp decoded as %T", ErrInvalidLog, values[1])
	}
	if !ts.IsInt64() || ts.Int64() > maxTimestamp {
		return Burn{}, fmt.Errorf("%w: timestamp %s out of range", ErrInvalidLog, ts)
	}
	return Burn{
		Contract:    l.Address,
		TxHash:      l.TxHash,
		LogIndex:    l.Index,
		BlockNumber: l.BlockNumber,
		BlockHash:   l.BlockHash,
		Payer:       common.BytesToAddress(payerTopic[:]),
		Digest:      l.Topics[2],
		Amount:      amount,
		Timestamp:   ts.Int64(),
	}, nil
}

// maxTimestamp is the largest Unix time Postgres' timestamptz holds
// (294276-12-31 23:59:59 UTC); a log claiming a later time cannot be stored.
const maxTimestamp = 9224318015999

// Rejected is a log from the burn contract with the burn event's topic0
// that does not decode as a LogBurnWithDigest. It is recorded, not credited.
type Rejected struct {
	Log    types.Log
	Reason string
}

// ValidateLogs checks a node's eth_getLogs reply for the range [from, to]
// against what was asked. A log from a contract not in contracts or with another
// topic0, outside the range, marked removed, without hashes, or repeated
// makes the whole reply untrustworthy: ValidateLogs returns an error wrapping
// ErrBadReply. A log that passes those checks but does not decode is
// returned in rejected. Burns keep reply order.
func ValidateLogs(logs []types.Log, contracts []common.Address, from, to uint64) (burns []Burn, rejected []Rejected, err error) {
	// Every log is checked before anything is built for the reply: a
	// reply of many logs that fails at its first costs nothing.
	for i, l := range logs {
		var why string
		switch {
		case !slices.Contains(contracts, l.Address):
			why = fmt.Sprintf("from %s, which was not asked for", l.Address.Hex())
		case len(l.Topics) == 0 || l.Topics[0] != BurnTopic:
			why = "has the wrong topic0"
		case l.BlockNumber < from || l.BlockNumber > to:
			why = fmt.Sprintf("in block %d, outside [%d, %d]", l.BlockNumber, from, to)
		case l.Removed:
			why = "is marked removed"
		case l.BlockHash == (common.Hash{}) || l.TxHash == (common.Hash{}):
			why = "has no block or transaction hash"
		default:
			continue
		}
		return nil, nil, fmt.Errorf("%w: log %d (tx %s index %d) %s", ErrBadReply, i, l.TxHash.Hex(), l.Index, why)
	}
	burns = make([]Burn, 0, len(logs))
	seen := make(map[logKey]struct{}, len(logs))
	for i, l := range logs {
		key := logKey{l.TxHash, l.Index}
		if _, dup := seen[key]; dup {
			return nil, nil, fmt.Errorf("%w: log %d (tx %s index %d) appears twice", ErrBadReply, i, l.TxHash.Hex(), l.Index)
		}
		seen[key] = struct{}{}
		b, err := DecodeBurn(l)
		if err != nil {
			rejected = append(rejected, Rejected{Log: l, Reason: err.Error()})
			continue
		}
		burns = append(burns, b)
	}
	return burns, rejected, nil
}

type logKey struct {
	tx    common.Hash
	index uint
}
