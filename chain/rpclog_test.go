package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// TestRPCLogDecodesAsTypesLog: a log decodes to what go-ethereum's own
// decoder gives, whichever optional fields the node sends.
func TestRPCLogDecodesAsTypesLog(t *testing.T) {
	t.Parallel()
	full := types.Log{Address: common.Address{1}, Topics: []common.Hash{BurnTopic, {2}, {3}},
		Data: common.LeftPadBytes(big.NewInt(7).Bytes(), 64), BlockNumber: 12, TxHash: common.Hash{4},
		TxIndex: 3, BlockHash: common.Hash{5}, Index: 9, Removed: true}
	b, err := json.Marshal([]*types.Log{&full})
	if err != nil {
		t.Fatal(err)
	}
	pending := `[{"address":"0x0100000000000000000000000000000000000000","topics":[],"data":"0x","transactionHash":"0x0400000000000000000000000000000000000000000000000000000000000000"}]`
	// A pending log as some nodes send it: the block's fields null.
	nulls := `[{"address":"0x0100000000000000000000000000000000000000","topics":[],"data":"0x","transactionHash":"0x0400000000000000000000000000000000000000000000000000000000000000",` +
		`"blockNumber":null,"blockHash":null,"transactionIndex":null,"logIndex":null,"removed":false}]`
	for _, doc := range []string{string(b), pending, nulls} {
		var want []types.Log
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		var got []types.Log
		if err := decodeResult([]byte(doc), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %+v, want %+v", got, want)
		}
	}
}

// TestRPCLogRequiresWhatTypesLogRequires: a log lacking a required field
// is a bad reply, named.
func TestRPCLogRequiresWhatTypesLogRequires(t *testing.T) {
	t.Parallel()
	fields := map[string]string{
		"address":         `"0x0100000000000000000000000000000000000000"`,
		"topics":          `[]`,
		"data":            `"0x"`,
		"transactionHash": `"0x0400000000000000000000000000000000000000000000000000000000000000"`,
	}
	for missing := range fields {
		for _, absent := range []string{"absent", "null", "then null"} {
			t.Run(missing+"/"+absent, func(t *testing.T) {
				t.Parallel()
				var parts []string
				for k, v := range fields {
					switch {
					case k != missing:
						parts = append(parts, `"`+k+`":`+v)
					case absent == "null":
						parts = append(parts, `"`+k+`":null`)
					default: // sent, then repeated as null
						parts = append(parts, `"`+k+`":`+v, `"`+k+`":null`)
					}
				}
				doc := "[{" + strings.Join(parts, ",") + "}]"
				var typed []types.Log
				if err := json.Unmarshal([]byte(doc), &typed); err == nil {
					t.Fatalf("types.Log took a log without %s", missing)
				}
				var logs []types.Log
				err := decodeResult([]byte(doc), &logs)
				if !errors.Is(err, ErrBadReply) || !strings.Contains(err.Error(), missing) {
					t.Fatalf("decoding = %v, want a bad reply naming %s", err, missing)
				}
			})
		}
	}
}

// TestRPCLogAboveMaxBlockIsABadReply: a log's block number above MaxBlock
// never leaves chain; MaxBlock itself does.
func TestRPCLogAboveMaxBlockIsABadReply(t *testing.T) {
	t.Parallel()
	doc := func(n uint64) []byte {
		return fmt.Appendf(nil, `[{"address":"0x0100000000000000000000000000000000000000","topics":[],"data":"0x",`+
			`"transactionHash":"0x0400000000000000000000000000000000000000000000000000000000000000","blockNumber":"%#x"}]`, n)
	}
	for _, tt := range []struct {
		block uint64
		bad   bool
	}{{MaxBlock, false}, {MaxBlock + 1, true}, {1<<64 - 1, true}} {
		var logs []types.Log
		err := decodeResult(doc(tt.block), &logs)
		if tt.bad != errors.Is(err, ErrBadReply) || (!tt.bad && logs[0].BlockNumber != tt.block) {
			t.Fatalf("decoding a log in block %d = %v, %v", tt.block, logs, err)
		}
	}
}

// FuzzRPCLogDecodesAsTypesLog: whatever a node sends, the one-pass decoder
// accepts a log only where go-ethereum's own decoder does, with the same
// values, and refuses one it accepts only for a block above MaxBlock or
// more topics than a log has.
func FuzzRPCLogDecodesAsTypesLog(f *testing.F) {
	const fields = `"address":"0x0100000000000000000000000000000000000000","topics":["0x0200000000000000000000000000000000000000000000000000000000000000"],"data":"0x0a","transactionHash":"0x0400000000000000000000000000000000000000000000000000000000000000"`
	for _, seed := range []string{
		`[{` + fields + `,"blockNumber":"0xc","transactionIndex":"0x3","blockHash":"0x0500000000000000000000000000000000000000000000000000000000000000","logIndex":"0x9","removed":true}]`,
		`[{` + fields + `,"blockNumber":null,"blockHash":null}]`,
		`[{` + fields + `,"address":null}]`,
		`[{` + fields + `,"data":"0xa"}]`,
		`[{` + fields + `,"logIndex":7}]`,
		`[{` + fields + `,"blockNumber":"0x4000000000000001"}]`,
		`[null,{}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var got []types.Log
		err := decodeResult(doc, &got)
		var want []types.Log
		wantErr := json.Unmarshal(doc, &want)
		for i := range want {
			want[i].BlockTimestamp = 0 // not read by burnpoller
		}
		switch {
		case err == nil && wantErr != nil:
			t.Fatalf("accepted %s, which go-ethereum refuses: %v", doc, wantErr)
		case err == nil && len(got) == 0 && len(want) == 0:
			// null: no logs, an empty slice here and nil there.
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("decoded %s as %+v, go-ethereum as %+v", doc, got, want)
		case err != nil && wantErr == nil:
			for _, l := range want {
				if (l.BlockNumber > MaxBlock || len(l.Topics) > maxTopics) && errors.Is(err, ErrBadReply) {
					return
				}
			}
			t.Fatalf("refused %s, which go-ethereum accepts: %v", doc, err)
		}
	})
}
