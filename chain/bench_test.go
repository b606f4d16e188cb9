package chain_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

func BenchmarkDecodeBurn(b *testing.B) {
	l := burnLog(5, 1, 0, big.NewInt(123456789), 1_700_000_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chain.DecodeBurn(l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateLogs checks and decodes a range's reply of 2000 logs,
// the size a range aims for.
func BenchmarkValidateLogs(b *testing.B) {
	logs := make([]types.Log, 2000)
	for i := range logs {
		logs[i] = burnLog(uint64(10+i/500), byte(i), uint(i), big.NewInt(int64(i+1)), 1_700_000_000)
		logs[i].TxHash[0], logs[i].TxHash[1], logs[i].TxHash[2] = byte(i>>8), byte(i), 1
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := chain.ValidateLogs(logs, []common.Address{contract}, 10, 20); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(logs)*b.N)/b.Elapsed().Seconds(), "logs/s")
}
