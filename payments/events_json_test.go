package payments

import (
	"encoding/json"
	"math/big"
	"testing"
	"time"
)

func TestEventJSONRoundTrip(t *testing.T) {
	max256, _ := new(big.Int).SetString("115792089237316195423570985008687907853269984665640564039457584007913129639935", 10)
	for _, e := range []Event{
		{Seq: 7, EventID: EventID(1337, "0xab", 3, KindConfirmed, "0xcd"), Kind: KindConfirmed, ChainID: 1337, TxHash: "0xab", LogIndex: 3,
			BlockHash: "0xcd", Amount: max256, PaymentID: 42, BurnedAt: time.Unix(1700000000, 0).UTC(), CreatedAt: time.Unix(1700000001, 0).UTC()},
		{Seq: 8, Kind: KindSeen, Amount: big.NewInt(0), BurnedAt: time.Unix(1, 0).UTC(), CreatedAt: time.Unix(2, 0).UTC()},
	} {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["amount"] != e.Amount.String() {
			t.Errorf("amount %v in %s, want the decimal string %s", m["amount"], b, e.Amount)
		}
		if (e.PaymentID == 0) != (m["payment_id"] == nil) {
			t.Errorf("payment_id %v in %s for payment %d", m["payment_id"], b, e.PaymentID)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Amount.Cmp(e.Amount) != 0 || back.PaymentID != e.PaymentID || back.EventID != e.EventID || !back.BurnedAt.Equal(e.BurnedAt) {
			t.Errorf("round trip of %s gave %+v", b, back)
		}
	}
	if got, want := EventID(1, "0xab", 0, KindSeen, "0xcd"), "1:0xab:0:seen:0xcd"; got != want {
		t.Errorf("EventID = %q, want %q", got, want)
	}
}
