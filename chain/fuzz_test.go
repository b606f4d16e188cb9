package chain_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// FuzzDecodeBurn feeds arbitrary topics and data to the decoder: it must
// never panic, and what it accepts must re-encode to the same log.
func FuzzDecodeBurn(f *testing.F) {
	good := burnLog(5, 1, 0, big.NewInt(1_000_000), 1_700_000_000)
	f.Add(good.Topics[1].Bytes(), good.Topics[2].Bytes(), good.Data, uint8(3))
	f.Add(make([]byte, 32), make([]byte, 32), make([]byte, 64), uint8(3))
	f.Add([]byte{1}, []byte{}, []byte{0xff}, uint8(1))
	f.Add(good.Topics[1].Bytes(), good.Topics[2].Bytes(), append(word(maxUint256()), word(big.NewInt(1))...), uint8(3))
	f.Fuzz(func(t *testing.T, payerTopic, digestTopic, data []byte, ntopics uint8) {
		topics := []common.Hash{chain.BurnTopic, common.BytesToHash(payerTopic), common.BytesToHash(digestTopic)}
		topics = topics[:min(int(ntopics), len(topics))]
		l := types.Log{Address: contract, Topics: topics, Data: data, BlockNumber: 5, TxHash: common.Hash{1}}
		b, err := chain.DecodeBurn(l)
		if err != nil {
			return
		}
		if b.Amount.Sign() < 0 || b.Amount.BitLen() > 256 {
			t.Fatalf("amount %s is not a uint256", b.Amount)
		}
		if b.Payer != common.BytesToAddress(topics[1][12:]) || b.Digest != topics[2] {
			t.Fatalf("decoded %+v from topics %v", b, topics)
		}
		re := append(common.LeftPadBytes(b.Amount.Bytes(), 32), common.LeftPadBytes(big.NewInt(b.Timestamp).Bytes(), 32)...)
		if string(re) != string(data) {
			t.Fatalf("data %x decoded to amount %s, timestamp %d", data, b.Amount, b.Timestamp)
		}
	})
}

// FuzzParseRangeLimit feeds arbitrary provider replies to the parser: it
// must never panic, and a suggested range it reports must be well formed.
func FuzzParseRangeLimit(f *testing.F) {
	for _, s := range []string{
		"exceed maximum block range 1000",
		"query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].",
		"Log response size exceeded. this block range should work: [0x0, 0xd043b8]",
		"eth_getLogs is limited to a 10,000 range",
		"query exceeds max results 20000, retry with the range 100-250",
		"range 1000000 exceeds limit of 10000",
		"block range is too wide (maximum 1024)",
		"project ID request rate exceeded",
		"[0xffffffffffffffffff, 0x1] block range too large",
		"limited to a 99999999999999999999999 blocks range",
	} {
		f.Add(-32602, s, "")
	}
	f.Fuzz(func(t *testing.T, code int, message, data string) {
		var d any
		if data != "" {
			d = data
		}
		l, ok := chain.ParseRangeLimit(code, message, d)
		if !ok {
			if l != (chain.RangeLimit{}) {
				t.Fatalf("not a range limit, yet %+v", l)
			}
			return
		}
		if l.Suggested && l.From > l.To {
			t.Fatalf("suggested range [%d, %d] is inverted", l.From, l.To)
		}
	})
}
