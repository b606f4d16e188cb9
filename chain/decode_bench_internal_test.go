package chain

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// denseLogsReply is a batch reply holding one eth_getLogs result of n burn logs
// as geth writes them, 400 a block.
func denseLogsReply(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`[{"jsonrpc":"2.0","id":0,"result":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44","topics":["0x%064x","0x%064x","0x%064x"],`+
			`"data":"0x%064x%064x","blockNumber":"0x%x","transactionHash":"0x%064x","transactionIndex":"0x%x",`+
			`"blockHash":"0x%064x","logIndex":"0x%x","removed":false}`,
			0xb0, i%97, i*31, i+1, 1_700_000_000, 10+i/400, i/100+1, i%100/4, 10+i/400, i%400)
	}
	b.WriteString(`]}]`)
	return b.Bytes()
}

// BenchmarkDecodeLogsReply decodes an eth_getLogs reply of 2000 logs, a
// dense range's, as the HTTP transport does.
func BenchmarkDecodeLogsReply(b *testing.B) {
	reply := denseLogsReply(2000)
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		var logs []types.Log
		elems := []rpc.BatchElem{{Method: "eth_getLogs", Result: &logs}}
		if err := decodeBatch(bytes.NewReader(reply), elems); err != nil || elems[0].Error != nil || len(logs) != 2000 {
			b.Fatal(err, elems[0].Error)
		}
	}
	b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "logs/s")
}

// blockReceiptsReply is a batch reply holding one eth_getBlockReceipts
// result as geth writes it: txs transactions of perTx burns each, every
// burn with the token's Transfer before it (a block of 3,100 burns: 31 of
// 100, 6,200 logs and more).
func blockReceiptsReply(txs, perTx int) []byte {
	var b bytes.Buffer
	b.WriteString(`[{"jsonrpc":"2.0","id":0,"result":[`)
	index := 0
	for t := range txs {
		if t > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"blockHash":"0x%064x","blockNumber":"0x10","contractAddress":null,"cumulativeGasUsed":"0x%x",`+
			`"effectiveGasPrice":"0x3b9aca07","from":"0x%040x","gasUsed":"0x2dc6c0","logs":[`, 0xb10c, (t+1)*3_000_000, 0xf00)
		for i := range perTx {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"address":"0x%040x","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef","0x%064x","0x%064x"],`+
				`"data":"0x%064x","blockNumber":"0x10","transactionHash":"0x%064x","transactionIndex":"0x%x",`+
				`"blockHash":"0x%064x","logIndex":"0x%x","removed":false},`, 0x70c, 0xba7c, 0xdead, i+1, t+1, t, 0xb10c, index)
			index++
			fmt.Fprintf(&b, `{"address":"0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44","topics":["%s","0x%064x","0x%064x"],`+
				`"data":"0x%064x%064x","blockNumber":"0x10","transactionHash":"0x%064x","transactionIndex":"0x%x",`+
				`"blockHash":"0x%064x","logIndex":"0x%x","removed":false}`, BurnTopic.Hex(), 0xba7c, t+7, i+1, 1_700_000_000, t+1, t, 0xb10c, index)
			index++
		}
		fmt.Fprintf(&b, `],"logsBloom":"0x%0512x","status":"0x1","to":"0x%040x","transactionHash":"0x%064x","transactionIndex":"0x%x","type":"0x2"}`,
			0, 0xba7c, t+1, t)
	}
	b.WriteString(`]}]`)
	return b.Bytes()
}

// BenchmarkDecodeBlockReceipts decodes the receipts of a block of 3,100
// burns as the HTTP transport does, and takes its burns out of them.
func BenchmarkDecodeBlockReceipts(b *testing.B) {
	reply := blockReceiptsReply(31, 100)
	h := Header{Number: 0x10, Hash: common.BigToHash(big.NewInt(0xb10c))}
	contracts := []common.Address{common.HexToAddress("0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44")}
	b.SetBytes(int64(len(reply)))
	b.ReportAllocs()
	for b.Loop() {
		var rs []rpcReceipt
		elems := []rpc.BatchElem{{Method: "eth_getBlockReceipts", Result: &rs}}
		if err := decodeBatch(bytes.NewReader(reply), elems); err != nil || elems[0].Error != nil {
			b.Fatal(err, elems[0].Error)
		}
		burns, err := burnsInReceipts(rs, h, contracts)
		if err != nil || len(burns) != 3100 {
			b.Fatal(len(burns), err)
		}
	}
	b.ReportMetric(float64(3100*b.N)/b.Elapsed().Seconds(), "burns/s")
}
