package chain_test

import (
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/burnpoller/burnpoller/chain"
)

var (
	contract = common.HexToAddress("0x00000000000000000000000000000000000000b1")
	payer    = common.HexToAddress("0x1111111111111111111111111111111111111111")
	digest   = common.HexToHash("0x2222222222222222222222222222222222222222222222222222222222222222")
)

func maxUint256() *big.Int {
	return new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
}

func word(v *big.Int) []byte { return common.LeftPadBytes(v.Bytes(), 32) }

// burnLog builds a well-formed LogBurnWithDigest log.
func burnLog(block uint64, tx byte, index uint, amount *big.Int, ts int64) types.Log {
	return types.Log{
		Address:     contract,
		Topics:      []common.Hash{chain.BurnTopic, common.BytesToHash(payer.Bytes()), digest},
		Data:        append(word(amount), word(big.NewInt(ts))...),
		BlockNumber: block,
		BlockHash:   common.BigToHash(new(big.Int).SetUint64(block + 1000)),
		TxHash:      common.BytesToHash([]byte{tx}),
		Index:       index,
	}
}

func TestBurnTopicIsTheEventSignature(t *testing.T) {
	want := crypto.Keccak256Hash([]byte("LogBurnWithDigest(address,uint256,bytes32,uint256)"))
	if chain.BurnTopic != want {
		t.Fatalf("BurnTopic = %s, want %s", chain.BurnTopic.Hex(), want.Hex())
	}
}

func TestDecodeBurnExactAmounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give *big.Int
	}{
		{"zero", big.NewInt(0)},
		{"one", big.NewInt(1)},
		{"one token of 6 decimals", big.NewInt(1_000_000)},
		{"2^64", new(big.Int).Lsh(big.NewInt(1), 64)},
		{"2^255", new(big.Int).Lsh(big.NewInt(1), 255)},
		{"2^256-1", maxUint256()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := chain.DecodeBurn(burnLog(5, 1, 3, tt.give, 1_700_000_000))
			if err != nil {
				t.Fatal(err)
			}
			if b.Amount.Cmp(tt.give) != 0 {
				t.Fatalf("amount = %s, want %s", b.Amount, tt.give)
			}
			if b.Payer != payer || b.Digest != digest || b.Timestamp != 1_700_000_000 || b.LogIndex != 3 || b.BlockNumber != 5 {
				t.Fatalf("decoded %+v", b)
			}
		})
	}
}

func TestDecodeBurnRejectsMalformedLogs(t *testing.T) {
	t.Parallel()
	good := func() types.Log { return burnLog(5, 1, 0, big.NewInt(7), 1_700_000_000) }
	tests := []struct {
		name string
		give func() types.Log
	}{
		{"two topics", func() types.Log { l := good(); l.Topics = l.Topics[:2]; return l }},
		{"four topics", func() types.Log { l := good(); l.Topics = append(l.Topics, digest); return l }},
		{"other topic0", func() types.Log { l := good(); l.Topics[0] = digest; return l }},
		{"payer topic not an address", func() types.Log { l := good(); l.Topics[1][0] = 1; return l }},
		{"short data", func() types.Log { l := good(); l.Data = l.Data[:63]; return l }},
		{"long data", func() types.Log { l := good(); l.Data = append(l.Data, 0); return l }},
		{"no data", func() types.Log { l := good(); l.Data = nil; return l }},
		{"timestamp beyond Postgres", func() types.Log {
			l := good()
			copy(l.Data[32:], word(new(big.Int).Lsh(big.NewInt(1), 70)))
			return l
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := chain.DecodeBurn(tt.give()); !errors.Is(err, chain.ErrInvalidLog) {
				t.Fatalf("DecodeBurn = %v, want ErrInvalidLog", err)
			}
		})
	}
}

func TestValidateLogs(t *testing.T) {
	t.Parallel()
	good := func() types.Log { return burnLog(15, 1, 0, big.NewInt(7), 1_700_000_000) }
	tests := []struct {
		name         string
		give         func() []types.Log
		wantErr      error
		want         int
		wantRejected int
	}{
		{"empty", func() []types.Log { return nil }, nil, 0, 0},
		{"two burns in one tx", func() []types.Log {
			a, b := good(), good()
			b.Index = 1
			return []types.Log{a, b}
		}, nil, 2, 0},
		{"other contract", func() []types.Log { l := good(); l.Address = payer; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"other event", func() []types.Log { l := good(); l.Topics[0] = digest; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"no topics", func() []types.Log { l := good(); l.Topics = nil; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"before range", func() []types.Log { l := good(); l.BlockNumber = 9; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"after range", func() []types.Log { l := good(); l.BlockNumber = 21; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"removed", func() []types.Log { l := good(); l.Removed = true; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"no block hash", func() []types.Log { l := good(); l.BlockHash = common.Hash{}; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"no tx hash", func() []types.Log { l := good(); l.TxHash = common.Hash{}; return []types.Log{l} }, chain.ErrBadReply, 0, 0},
		{"same log twice", func() []types.Log { return []types.Log{good(), good()} }, chain.ErrBadReply, 0, 0},
		{"undecodable data is rejected, the rest kept", func() []types.Log {
			bad, ok := good(), good()
			bad.Data = bad.Data[:10]
			ok.Index = 1
			return []types.Log{bad, ok}
		}, nil, 1, 1},
		{"dirty payer topic is rejected", func() []types.Log { l := good(); l.Topics[1][0] = 0xff; return []types.Log{l} }, nil, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			burns, rejected, err := chain.ValidateLogs(tt.give(), []common.Address{contract}, 10, 20)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ValidateLogs = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(burns) != tt.want || len(rejected) != tt.wantRejected {
				t.Fatalf("%d burns and %d rejected, want %d and %d", len(burns), len(rejected), tt.want, tt.wantRejected)
			}
			for _, r := range rejected {
				if r.Reason == "" {
					t.Fatal("rejected log without a reason")
				}
			}
		})
	}
}
