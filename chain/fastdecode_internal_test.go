package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/rpc"
)

// geth's eth_getLogs and receipts replies, small: the shapes the scanner is
// for.
const (
	logsDoc = `[{"address":"0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44","topics":["0xb0a5e1b1d41cc8f95b1ca66e9e0a5fd0d25ed1ae3a30a4f5e8c4e0bb53a8e1d8",` +
		`"0x000000000000000000000000000000000000000000000000000000000000ba7c","0x0000000000000000000000000000000000000000000000000000000000000007"],` +
		`"data":"0x00000000000000000000000000000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000065a4f3c0",` +
		`"blockNumber":"0x10","transactionHash":"0x00000000000000000000000000000000000000000000000000000000000000a1","transactionIndex":"0x0",` +
		`"blockHash":"0x000000000000000000000000000000000000000000000000000000000000b10c","logIndex":"0x1","removed":false}]`
	receiptsDoc = `[{"blockHash":"0x000000000000000000000000000000000000000000000000000000000000b10c","blockNumber":"0x10","contractAddress":null,` +
		`"cumulativeGasUsed":"0x5208","effectiveGasPrice":"0x3b9aca07","from":"0x0000000000000000000000000000000000000f00","gasUsed":"0x5208",` +
		`"logs":` + logsDoc + `,"logsBloom":"0x00","status":"0x1","to":"0x000000000000000000000000000000000000ba7c",` +
		`"transactionHash":"0x00000000000000000000000000000000000000000000000000000000000000a1","transactionIndex":"0x0","type":"0x2",` +
		`"blobGasUsed":"0x0","nested":{"a":[1,-2.5e+3,true,null,"\u00e9\n"]}}]`
)

// TestNodeRepliesTakeTheFastPath: the replies nodes send are read by the
// scanner itself, not handed on to encoding/json (which would be correct,
// only slow), and give what encoding/json gives.
func TestNodeRepliesTakeTheFastPath(t *testing.T) {
	t.Parallel()
	spaced := strings.NewReplacer(",", " ,\n\t", ":", " : ", "[", "[ ", "{", "{\r\n").Replace(logsDoc)
	for _, tt := range []struct {
		name string
		doc  string
		read func(*scanner) (any, bool)
		want func() any
	}{
		{"logs", logsDoc, func(s *scanner) (any, bool) { return s.logs() }, func() any { return new([]rpcLog) }},
		{"logs, spaced", spaced, func(s *scanner) (any, bool) { return s.logs() }, func() any { return new([]rpcLog) }},
		{"no logs", `[]`, func(s *scanner) (any, bool) { return s.logs() }, func() any { return new([]rpcLog) }},
		{"null logs", `null`, func(s *scanner) (any, bool) { return s.logs() }, func() any { return new([]rpcLog) }},
		{"block receipts", receiptsDoc, func(s *scanner) (any, bool) { return s.receipts() }, func() any { return new([]rpcReceipt) }},
		{"a receipt", receiptsDoc[1 : len(receiptsDoc)-1], func(s *scanner) (any, bool) { return s.receiptOrNull() }, func() any { return new(*rpcReceipt) }},
		{"no receipt", `null`, func(s *scanner) (any, bool) { return s.receiptOrNull() }, func() any { return new(*rpcReceipt) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := scanner{b: []byte(tt.doc)}
			got, ok := tt.read(&s)
			if !ok || s.i != len(s.b) {
				t.Fatalf("the scanner gave up at byte %d of %s", s.i, tt.doc)
			}
			want := tt.want()
			if err := json.Unmarshal([]byte(tt.doc), want); err != nil {
				t.Fatal(err)
			}
			if w := reflect.ValueOf(want).Elem().Interface(); !reflect.DeepEqual(got, w) {
				t.Fatalf("scanned %+v, encoding/json %+v", got, w)
			}
		})
	}
}

// FuzzFastDecodeIsUnmarshal: whatever a node sends as a result of logs or
// receipts, decodeResult gives what json.Unmarshal gives, error or value.
func FuzzFastDecodeIsUnmarshal(f *testing.F) {
	const hash = `"0x0400000000000000000000000000000000000000000000000000000000000000"`
	for _, seed := range []string{
		logsDoc, receiptsDoc, receiptsDoc[1 : len(receiptsDoc)-1], `null`, `[]`, `[null]`, `{}`, ` [ ] `, `[{}]`,
		`[{"address":null,"topics":null,"data":null,"blockNumber":null,"logIndex":null,"removed":null}]`,
		`[{"Address":"0x0100000000000000000000000000000000000000"}]`,
		`[{"addreſs":"0x0100000000000000000000000000000000000000"}]`,
		`[{"\u0061ddress":"0x0100000000000000000000000000000000000000"}]`,
		`[{"address":"0X0100000000000000000000000000000000000ABC","data":"0X0aFF","logIndex":"0XfF"}]`,
		`[{"data":"","blockNumber":""}]`,
		`[{"data":"0xa"}]`, `[{"data":"0xzz"}]`, `[{"data":7}]`,
		`[{"logIndex":"0x01"}]`, `[{"logIndex":"0x"}]`, `[{"blockNumber":"0x10000000000000000"}]`, `[{"blockNumber":"0xffffffffffffffff"}]`,
		`[{"topics":[` + hash + `,` + hash + `,` + hash + `,` + hash + `,` + hash + `]}]`, `[{"topics":[null]}]`, `[{"topics":[]}]`,
		`[{"transactionHash":` + hash + `,"transactionHash":null}]`, `[{"removed":true,"removed":"false"}]`,
		`[{"status":"0x1","status":null,"logs":null,"transactionHash":` + hash + `}]`,
		`[{"data":"0x"}]`, `[{"data":"0x","topics":[` + hash + `]}]`,
		`[{"address":"0x01"}]`, `[{"address":"0x010000000000000000000000000000000000000000"}]`,
		`[{"transactionHash":"0x04"}]`, `[{"blockHash":` + hash[:len(hash)-1] + `00"}]`, `[{"topics":["0x02"]}]`,
		`[{"removed":"x"},{"data":"0xzz"},{}]`, `[{"data":"0xzz"},{},{}]`, `[{"logs":"x"},{"status":"0x01"},{}]`,
		`[{"logs":[{"address":"0x0100000000000000000000000000000000000000","data":"0x01"}],"logs":[{"topics":[]}]}]`,
		`{"logs":[{"data":"0x01"}],"logs":[{"topics":[]}]}`, `[{"removed":false,"removed":true}]`,
		`[{"x":[[[{"y":{}}]]],"z":-0.0e-0}]`, `[{"x":01}]`, `[{"x":1.}]`, `[{"x":"\x"}]`, `[{"x":tru}]`, `[1]`, `[{},]`, `[{"a" 1}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		same(t, doc, func() any { return new([]rpcLog) })
		same(t, doc, func() any { return new([]rpcReceipt) })
		same(t, doc, func() any { return new(*rpcReceipt) })
	})
}

// same decodes doc with json.Unmarshal, with decodeResult, and, streamed,
// as the result of a lone call's reply (decodeCall) and of a batch's
// (decodeBatch), each into a new value of the type fresh makes, and fails
// unless all give the same value, or all refuse it; decodeResult, which
// gives up to json.Unmarshal whole, also with the same error.
func same(t *testing.T, doc []byte, fresh func() any) {
	t.Helper()
	want := fresh()
	werr := json.Unmarshal(doc, want)
	check := func(how string, got any, err error, sameError bool) {
		t.Helper()
		if (err == nil) != (werr == nil) || (sameError && err != nil && err.Error() != werr.Error()) {
			t.Fatalf("%T from %q: %s says %v, json.Unmarshal %v", got, doc, how, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from %q: %s gives %+v, json.Unmarshal %+v", got, doc, how, reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem())
		}
	}
	got := fresh()
	check("decodeResult", got, decodeResult(doc, got), true)
	if !json.Valid(doc) || bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) > 5000 {
		// Not a reply's result: the reply would fail whole. Nor one nested
		// near the reader's limit, which counts the reply's own levels.
		return
	}
	got = fresh()
	el := rpc.BatchElem{Result: got}
	reply := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), doc...), '}')
	if err := decodeCall(bytes.NewReader(reply), &el); err != nil {
		t.Fatalf("%T from %q: decodeCall failed the reply: %v", got, doc, err)
	}
	check("the reply streamed", got, el.Error, false)
	got = fresh()
	elems := []rpc.BatchElem{{Result: new(string)}, {Result: got}}
	batch := append(append([]byte(`[{"jsonrpc":"2.0","id":0,"result":"a"},{"jsonrpc":"2.0","id":1,"result":`), doc...), "}]"...)
	if err := decodeBatch(bytes.NewReader(batch), elems, 0); err != nil {
		t.Fatalf("%T from %q: decodeBatch failed the reply: %v", got, doc, err)
	}
	check("the batch streamed", got, elems[1].Error, false)
}

// TestAReplyCannotChangeHowLaterRepliesDecode: a reply giving its result
// twice, the second decoded into the first, writes only into its own
// logs: an honest reply after it decodes as it would have.
func TestAReplyCannotChangeHowLaterRepliesDecode(t *testing.T) {
	t.Parallel()
	for _, twice := range []string{
		`[{"jsonrpc":"2.0","id":0,"result":[{"removed":false}],"result":[{"removed":true}]}]`,
		`[{"jsonrpc":"2.0","id":0,"result":[{"removed":true}],"result":[{"removed":false}]}]`,
		`[{"jsonrpc":"2.0","result":[{"removed":true}],"id":0,"result":[{"removed":false}]}]`,
	} {
		var first []rpcLog
		if err := decodeBatch(strings.NewReader(twice), []rpc.BatchElem{{Result: &first}}, 0); err != nil {
			t.Fatal(err)
		}
		for _, removed := range []bool{false, true} {
			doc := strings.Replace(logsDoc, `"removed":false`, fmt.Sprintf(`"removed":%t`, removed), 1)
			var raw []rpcLog
			elems := []rpc.BatchElem{{Result: &raw}}
			reply := `[{"jsonrpc":"2.0","id":0,"result":` + doc + `}]`
			if err := decodeBatch(strings.NewReader(reply), elems, 0); err != nil || elems[0].Error != nil {
				t.Fatal(err, elems[0].Error)
			}
			if len(raw) != 1 || raw[0].Removed == nil || *raw[0].Removed != removed {
				t.Fatalf("after %s, a log with \"removed\":%t decoded as %+v", twice, removed, raw)
			}
		}
	}
}

// FuzzReplyErrorIsUnmarshal: a reply's error, its data streamed, is what
// json.Unmarshal into a replyError gives, as far as classify reads it.
func FuzzReplyErrorIsUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"code":-32005,"message":"limit exceeded","data":{"from":"0x1","to":"0x2","rate":{"backoff_seconds":1.5}}}`,
		`{"code":-32000,"message":"header not found","data":[{},{}]}`, `{"data":"x","Data":null,"CODE":3,"meſſage":"m"}`,
		`{"code":1,"data":5}`, `{"code":"x"}`, `null`, `"oops"`, `{}`, `{"message":"\u00e9","data":"` + strings.Repeat("d", 5000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if !json.Valid(doc) {
			return
		}
		want := new(replyError)
		werr := json.Unmarshal(doc, want)
		el := rpc.BatchElem{Result: new(string)}
		reply := append(append([]byte(`{"jsonrpc":"2.0","id":1,"error":`), doc...), '}')
		err := decodeCall(bytes.NewReader(reply), &el)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: decodeCall says %v, json.Unmarshal %v", doc, err, werr)
		}
		if err != nil {
			return
		}
		var got *replyError
		if !errors.As(el.Error, &got) {
			t.Fatalf("%q: the call's error is %v", doc, el.Error)
		}
		if got.Code != want.Code || got.Message != want.Message || !reflect.DeepEqual(got.ErrorData(), want.ErrorData()) {
			t.Fatalf("%q: read %d %q %#v, json.Unmarshal %d %q %#v", doc, got.Code, got.Message, got.ErrorData(), want.Code, want.Message, want.ErrorData())
		}
	})
}
