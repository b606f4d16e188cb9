package chain

import (
	"bytes"
	"fmt"
	"testing"

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
		var raw []rpcLog
		elems := []rpc.BatchElem{{Method: "eth_getLogs", Result: &raw}}
		if err := decodeBatch(bytes.NewReader(reply), elems, 0); err != nil || elems[0].Error != nil {
			b.Fatal(err, elems[0].Error)
		}
		if _, err := toLogs(raw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2000*b.N)/b.Elapsed().Seconds(), "logs/s")
}
