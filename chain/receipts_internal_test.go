package chain

import (
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// TestReceiptsKeepOnlyBurnLogs: a receipt's logs are decoded keeping the
// burn event's only, in their order, and a receipt whose other logs do not
// even decode as logs still gives its burns.
func TestReceiptsKeepOnlyBurnLogs(t *testing.T) {
	transfer := common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
	reply := `{"transactionHash":"` + common.HexToHash("0x01").Hex() + `","blockHash":"` + common.HexToHash("0x02").Hex() + `","status":"0x1","logs":[
		{"address":"0x00000000000000000000000000000000000000aa","topics":["` + transfer.Hex() + `"],"data":"0x","logIndex":"0x0"},
		{"address":"0x00000000000000000000000000000000000000bb","topics":["` + BurnTopic.Hex() + `","` + common.HexToHash("0x03").Hex() + `","` + common.HexToHash("0x04").Hex() + `"],"data":"0x05","logIndex":"0x1"},
		{"address":"0x00000000000000000000000000000000000000aa","topics":[],"data":"0x","logIndex":"0x2"},
		{"address":"0x00000000000000000000000000000000000000bb","topics":["` + BurnTopic.Hex() + `","` + common.HexToHash("0x06").Hex() + `","` + common.HexToHash("0x07").Hex() + `"],"data":"0x08","logIndex":"0x3"}]}`
	var rc rpcReceipt
	if err := json.Unmarshal([]byte(reply), &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.Logs) != 2 || rc.Logs[0].Index.v != 1 || rc.Logs[1].Index.v != 3 || rc.Logs[1].Topics[1] != common.HexToHash("0x06") {
		t.Fatalf("kept %+v, want the burns at log indexes 1 and 3", rc.Logs)
	}
	var none rpcReceipt
	if err := json.Unmarshal([]byte(`{"logs":null}`), &none); err != nil || len(none.Logs) != 0 {
		t.Fatalf("null logs: %+v, %v", none.Logs, err)
	}
	if err := json.Unmarshal([]byte(`{"logs":{"a":1}}`), &none); err == nil {
		t.Fatal("logs that are not an array decoded")
	}
}
