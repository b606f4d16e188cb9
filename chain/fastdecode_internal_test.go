package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/go-json-experiment/json/jsontext"
)

// geth's eth_getLogs and receipts replies, small: the shapes the reader is
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
	// burnReceiptDoc is a receipt holding a burn and another log.
	burnReceiptDoc = `{"blockHash":"0x000000000000000000000000000000000000000000000000000000000000b10c","status":"0x1",` +
		`"transactionHash":"0x00000000000000000000000000000000000000000000000000000000000000a1","logs":[` +
		`{"address":"0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44","topics":["0xf09120ca4b005026b37bf2b4ec21e3d1fbee7365fb9b7ed7558eff94224841e8",` +
		`"0x000000000000000000000000000000000000000000000000000000000000ba7c","0x0000000000000000000000000000000000000000000000000000000000000007"],` +
		`"data":"0x00000000000000000000000000000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000065a4f3c0",` +
		`"blockNumber":"0x10","transactionHash":"0x00000000000000000000000000000000000000000000000000000000000000a1","transactionIndex":"0x0",` +
		`"blockHash":"0x000000000000000000000000000000000000000000000000000000000000b10c","logIndex":"0x1","removed":false},` +
		`{"address":"0x000000000000000000000000000000000000070c","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"],` +
		`"data":"0x01","transactionHash":"0x00000000000000000000000000000000000000000000000000000000000000a1","logIndex":"0x2"}]}`
	headerDoc = `{"number":"0x10","hash":"0x000000000000000000000000000000000000000000000000000000000000b10c",` +
		`"parentHash":"0x000000000000000000000000000000000000000000000000000000000000b10b","timestamp":"0x65a4f3c0","logsBloom":"0x` +
		`00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000` +
		`00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000` +
		`00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000` +
		`00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",` +
		`"miner":"0x0000000000000000000000000000000000000000","extraData":"0x","gasLimit":"0x1c9c380",` +
		`"transactions":["0x00000000000000000000000000000000000000000000000000000000000000a1"],"uncles":[]}`
)

// The oracle the reader is held to: encoding/json, into types whose
// decoders are go-ethereum's (hexutil), then the checks the reader makes
// of each element.

// UnmarshalJSON decodes an address; null leaves it absent.
func (f *optAddress) UnmarshalJSON(b []byte) error { return decodeOpt(b, &f.set, &f.v) }

// UnmarshalJSON decodes a hash; null leaves it absent.
func (f *optHash) UnmarshalJSON(b []byte) error { return decodeOpt(b, &f.set, &f.v) }

// UnmarshalJSON decodes hex bytes; null leaves them absent.
func (f *optBytes) UnmarshalJSON(b []byte) error { return decodeOpt(b, &f.set, &f.v) }

// UnmarshalJSON decodes a hex quantity; null leaves it absent.
func (f *optUint64) UnmarshalJSON(b []byte) error { return decodeOpt(b, &f.set, &f.v) }

// UnmarshalJSON decodes a hex quantity; null leaves it absent.
func (f *optUint) UnmarshalJSON(b []byte) error { return decodeOpt(b, &f.set, &f.v) }

// decodeOpt decodes b into v, unless b is null (an absent field). It
// resets the field first: a key repeated with null leaves it absent.
func decodeOpt[T any, P interface {
	*T
	json.Unmarshaler
}](b []byte, set *bool, v *T) error {
	var zero T
	*v, *set = zero, false
	if string(b) == "null" {
		return nil
	}
	*set = true
	return P(v).UnmarshalJSON(b)
}

// jsonReceipt is a receipt as encoding/json decodes it.
type jsonReceipt struct {
	TxHash    *common.Hash    `json:"transactionHash"`
	BlockHash *common.Hash    `json:"blockHash"`
	Status    *hexutil.Uint64 `json:"status"`
	Logs      []rpcLog        `json:"logs"`
}

// oracleLogs is raw's logs as encoding/json and the checks give them.
func oracleLogs(raw []rpcLog) ([]types.Log, error) {
	if raw == nil {
		return nil, nil
	}
	out := make([]types.Log, len(raw))
	for i := range raw {
		l, err := raw[i].toLog(i)
		if err != nil {
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}

// oracleReceipt is r as encoding/json and the checks give it, its
// burn-event logs kept.
func oracleReceipt(r jsonReceipt) (rpcReceipt, error) {
	if r.TxHash == nil || r.BlockHash == nil || r.Status == nil {
		return rpcReceipt{}, errors.New("lacks a field")
	}
	logs, err := oracleLogs(r.Logs)
	if logs != nil {
		logs = slices.DeleteFunc(logs, func(l types.Log) bool { return len(l.Topics) == 0 || l.Topics[0] != BurnTopic })
	}
	return rpcReceipt{TxHash: *r.TxHash, BlockHash: *r.BlockHash, Status: uint64(*r.Status), Logs: logs}, err
}

// oracle decodes doc as the reader must into a new value of want's type
// (want is *[]types.Log, *[]rpcReceipt, **rpcReceipt or **rpcHeader).
func oracle(doc []byte, want any) error {
	switch p := want.(type) {
	case *[]types.Log:
		var raw []rpcLog
		if err := json.Unmarshal(doc, &raw); err != nil {
			return err
		}
		logs, err := oracleLogs(raw)
		*p = logs
		return err
	case *[]rpcReceipt:
		var raw []jsonReceipt
		if err := json.Unmarshal(doc, &raw); err != nil {
			return err
		}
		if raw == nil {
			return nil
		}
		*p = make([]rpcReceipt, len(raw))
		for i, r := range raw {
			var err error
			if (*p)[i], err = oracleReceipt(r); err != nil {
				return err
			}
		}
		return logsTwice(doc, 2)
	case **rpcReceipt:
		var raw *jsonReceipt
		if err := json.Unmarshal(doc, &raw); err != nil || raw == nil {
			return err
		}
		r, err := oracleReceipt(*raw)
		*p = &r
		if err != nil {
			return err
		}
		return logsTwice(doc, 1)
	case **rpcHeader:
		return json.Unmarshal(doc, p)
	}
	panic(fmt.Sprintf("no oracle for %T", want))
}

// logsTwice refuses doc if a receipt in it, an object at depth (1 for a
// receipt, 2 for a block's), gives its logs twice: encoding/json would
// merge the two arrays, and the reader refuses them.
func logsTwice(doc []byte, depth int) error {
	dec := jsontext.NewDecoder(bytes.NewReader(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	n := 0
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		if dec.StackDepth() != depth {
			continue
		}
		kind, length := dec.StackIndex(depth)
		switch {
		case tok.Kind() == '{':
			n = 0
		case kind == '{' && tok.Kind() == '"' && length%2 == 1 && bytes.EqualFold([]byte(tok.String()), []byte("logs")):
			if n++; n > 1 {
				return errors.New("logs given twice")
			}
		}
	}
}

// TestNodeRepliesDecode: the replies nodes send are read as encoding/json
// reads them.
func TestNodeRepliesDecode(t *testing.T) {
	t.Parallel()
	spaced := strings.NewReplacer(",", " ,\n\t", ":", " : ", "[", "[ ", "{", "{\r\n").Replace(logsDoc)
	for _, tt := range []struct {
		name  string
		doc   string
		fresh func() any
	}{
		{"logs", logsDoc, func() any { return new([]types.Log) }},
		{"logs, spaced", spaced, func() any { return new([]types.Log) }},
		{"no logs", `[]`, func() any { return new([]types.Log) }},
		{"null logs", `null`, func() any { return new([]types.Log) }},
		{"block receipts", receiptsDoc, func() any { return new([]rpcReceipt) }},
		{"a receipt", receiptsDoc[1 : len(receiptsDoc)-1], func() any { return new(*rpcReceipt) }},
		{"no receipt", `null`, func() any { return new(*rpcReceipt) }},
		{"a receipt with a burn", burnReceiptDoc, func() any { return new(*rpcReceipt) }},
		{"receipts with a burn", "[" + burnReceiptDoc + "," + burnReceiptDoc + "]", func() any { return new([]rpcReceipt) }},
		{"a block", headerDoc, func() any { return new(*rpcHeader) }},
		{"no block", `null`, func() any { return new(*rpcHeader) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, want := tt.fresh(), tt.fresh()
			if err := oracle([]byte(tt.doc), want); err != nil {
				t.Fatal(err)
			}
			if err := decodeResult([]byte(tt.doc), got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read %+v, encoding/json %+v", reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem())
			}
			if r, ok := got.(**rpcReceipt); ok && strings.Contains(tt.doc, BurnTopic.Hex()) && len((*r).Logs) != 1 {
				t.Fatalf("kept %d logs of the receipt, want its burn", len((*r).Logs))
			}
		})
	}
}

// FuzzFastDecodeIsUnmarshal: whatever a node sends as a result of logs,
// receipts or a block, the reader gives what encoding/json gives (into
// rpcLog, rpcHeader and go-ethereum's hexutil types) after the reader's
// checks of each element (rpcLog.toLog, a receipt's fields, logs given
// once), or refuses it where they do: decoding the result alone
// (decodeResult) and streamed as a call's and a batch's reply.
func FuzzFastDecodeIsUnmarshal(f *testing.F) {
	const hash = `"0x0400000000000000000000000000000000000000000000000000000000000000"`
	for _, seed := range []string{
		logsDoc, receiptsDoc, receiptsDoc[1 : len(receiptsDoc)-1], headerDoc, burnReceiptDoc, "[" + burnReceiptDoc + "]", `null`, `[]`, `[null]`, `{}`, ` [ ] `, `[{}]`,
		`[{"address":null,"topics":null,"data":null,"blockNumber":null,"logIndex":null,"removed":null}]`,
		`[{"Address":"0x0100000000000000000000000000000000000000"}]`,
		`[{"addreſs":"0x0100000000000000000000000000000000000000"}]`,
		`[{"\u0061ddress":"0x0100000000000000000000000000000000000000"}]`,
		`[{"address":"0X0100000000000000000000000000000000000ABC","data":"0X0aFF","logIndex":"0XfF"}]`,
		`[{"data":"","blockNumber":""}]`,
		`[{"data":"0xa"}]`, `[{"data":"0xzz"}]`, `[{"data":7}]`, `[{"data":"0x\u0030\u0030"}]`,
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
		`{"number":"0x","hash":null,"transactions":[]}`, `{"number":"0x1","number":null}`, `{"logsBloom":"\u0030x00"}`,
		`{"transactions":[0]}`, `{"TRANSACTIONS":[` + hash + `],"transactions":null}`, `{"timestamp":"0x1","Timestamp":"0x2"}`,
		`{"number":"0x` + strings.Repeat("f", 65) + `"}`, `[[]]`, `"x"`, `1e3`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		same(t, doc, func() any { return new([]types.Log) })
		same(t, doc, func() any { return new([]rpcReceipt) })
		same(t, doc, func() any { return new(*rpcReceipt) })
		same(t, doc, func() any { return new(*rpcHeader) })
	})
}

// same decodes doc with the oracle, with decodeResult, and, streamed, as
// the result of a lone call's reply (decodeCall) and of a batch's
// (decodeBatch), each into a new value of the type fresh makes, and fails
// unless all give the same value, or all refuse it.
func same(t *testing.T, doc []byte, fresh func() any) {
	t.Helper()
	want := fresh()
	werr := oracle(doc, want)
	check := func(how string, got any, err error) {
		t.Helper()
		if (err == nil) != (werr == nil) {
			t.Fatalf("%T from %q: %s says %v, encoding/json %v", got, doc, how, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from %q: %s gives %+v, encoding/json %+v", got, doc, how, reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem())
		}
	}
	got := fresh()
	check("decodeResult", got, decodeResult(doc, got))
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
	check("the reply streamed", got, el.Error)
	got = fresh()
	elems := []rpc.BatchElem{{Result: new(string)}, {Result: got}}
	batch := append(append([]byte(`[{"jsonrpc":"2.0","id":0,"result":"a"},{"jsonrpc":"2.0","id":1,"result":`), doc...), "}]"...)
	if err := decodeBatch(bytes.NewReader(batch), elems); err != nil {
		t.Fatalf("%T from %q: decodeBatch failed the reply: %v", got, doc, err)
	}
	check("the batch streamed", got, elems[1].Error)
	got = fresh()
	elems = []rpc.BatchElem{{Result: got}}
	batch = append(append([]byte(`[{"jsonrpc":"2.0","result":`), doc...), `,"id":0}]`...)
	if err := decodeBatch(bytes.NewReader(batch), elems); err != nil {
		t.Fatalf("%T from %q: decodeBatch failed the reply with the id last: %v", got, doc, err)
	}
	check("the batch with the id last", got, elems[0].Error)
}

// TestAReplyCannotChangeHowLaterRepliesDecode: a reply giving its result
// twice takes the last, and writes only into its own logs: an honest
// reply after it decodes as it would have.
func TestAReplyCannotChangeHowLaterRepliesDecode(t *testing.T) {
	t.Parallel()
	log := strings.TrimSuffix(strings.TrimPrefix(logsDoc, "["), "]")
	for _, twice := range []string{
		`[{"jsonrpc":"2.0","id":0,"result":[` + log + `,` + log + `],"result":[{"removed":true}]}]`,
		`[{"jsonrpc":"2.0","id":0,"result":[{"removed":true}],"result":[` + log + `]}]`,
		`[{"jsonrpc":"2.0","result":[{"removed":true}],"id":0,"result":[` + log + `]}]`,
	} {
		var first []types.Log
		if err := decodeBatch(strings.NewReader(twice), []rpc.BatchElem{{Result: &first}}); err != nil {
			t.Fatal(err)
		}
		for _, removed := range []bool{false, true} {
			doc := strings.Replace(logsDoc, `"removed":false`, fmt.Sprintf(`"removed":%t`, removed), 1)
			var logs []types.Log
			elems := []rpc.BatchElem{{Result: &logs}}
			reply := `[{"jsonrpc":"2.0","id":0,"result":` + doc + `}]`
			if err := decodeBatch(strings.NewReader(reply), elems); err != nil || elems[0].Error != nil {
				t.Fatal(err, elems[0].Error)
			}
			if len(logs) != 1 || logs[0].Removed != removed {
				t.Fatalf("after %s, a log with \"removed\":%t decoded as %+v", twice, removed, logs)
			}
		}
	}
}

// FuzzReplyErrorIsUnmarshal: a reply's error, read as it streams in, is
// what json.Unmarshal into a replyError gives, as far as classify reads
// it; its message is the node's string as encoding/json decodes it, cut
// (cutText).
func FuzzReplyErrorIsUnmarshal(f *testing.F) {
	for _, seed := range []string{
		`{"code":-32005,"message":"limit exceeded","data":{"from":"0x1","to":"0x2","rate":{"backoff_seconds":1.5}}}`,
		`{"code":-32000,"message":"header not found","data":[{},{}]}`, `{"data":"x","Data":null,"CODE":3,"meſſage":"m"}`,
		`{"code":1,"data":5}`, `{"code":"x"}`, `null`, `"oops"`, `{}`, `{"message":"\u00e9","data":"` + strings.Repeat("d", 5000) + `"}`,
		`{"code":1e3}`, `{"code":-0}`, `{"code":99999999999999999999}`, `{"code":1.5}`, `{"code":null,"message":null}`,
		`{"message":"\ud83d\ude00 \ud83d \udc00\u0041 ` + "\xff\xe2\x82" + `"}`, `{"message":"` + strings.Repeat("é", 300) + `x"}`,
		`{"message":"` + strings.Repeat(`\u00e9`, 300) + `"}`, `{"message":` + strings.Repeat("1", 100) + `}`,
		`{"message":"` + strings.Repeat("\xff", 171) + `","message":"` + strings.Repeat("\xff", 171) + `","message":"m"}`,
		`{"data":{"ab":0,"ac":0,"ad":"x","ae":{"f":"g"},"ab":"y"},"data":{"zz":"1","aa":"2"}}`,
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
		var message struct {
			Message json.RawMessage `json:"message"`
		}
		var s string
		if json.Unmarshal(doc, &message) == nil && json.Unmarshal(message.Message, &s) == nil && string(got.Message) != cutText(s) {
			t.Fatalf("%q: message %q, encoding/json's cut %q", doc, got.Message, cutText(s))
		}
	})
}
