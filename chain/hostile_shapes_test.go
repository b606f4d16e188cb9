package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/hostile"
)

// nearCap is the size of each hostile reply: inside the reply cap
// (chain.MaxResponseBytes), as a node trying to hurt would make it.
const nearCap = 7 << 20

// allocPerByte is the most a reply may cost: bytes allocated in decoding
// it (and in the call that reads it) per byte of the reply.
const allocPerByte = 4

// flow is a call of the client's API that reads a reply of the node's
// making for one method, target: the replies to the other methods it
// calls on the way are valid ones.
type flow struct {
	name   string
	target string
	opts   chain.Options
	call   func(context.Context, *chain.Client) error
	valid  func(hostile.Call) string
}

// The blocks and the burn the valid replies give: block n has the hash
// shapeHash(n), block 10 holds one burn of shapeContract in transaction
// shapeTx.
var (
	shapeContract = common.HexToAddress("0x537e697c7ab75a26f9ecf0ce810e3154dfcaaf44")
	shapeTx       = common.HexToHash("0xa1")
	shapeZeros    = strings.Repeat("0", 512)
)

func shapeHash(n uint64) common.Hash { return common.BigToHash(new(big.Int).SetUint64(0xb10c00 + n)) }

// shapeHeader is block n's header; txs, if given, the hashes it lists.
func shapeHeader(n uint64, txs ...common.Hash) string {
	list := make([]string, len(txs))
	for i, tx := range txs {
		list[i] = `"` + tx.Hex() + `"`
	}
	return fmt.Sprintf(`{"number":"0x%x","hash":"%s","parentHash":"%s","timestamp":"0x65a4f3c0","logsBloom":"0x%s","transactions":[%s]}`,
		n, shapeHash(n).Hex(), shapeHash(n-1).Hex(), shapeZeros, strings.Join(list, ","))
}

// shapeBurn is the burn of block 10.
func shapeBurn() string {
	return fmt.Sprintf(`{"address":"%s","topics":["%s","0x%064x","0x%064x"],"data":"0x%064x%064x","blockNumber":"0xa",`+
		`"transactionHash":"%s","transactionIndex":"0x0","blockHash":"%s","logIndex":"0x0","removed":false}`,
		shapeContract.Hex(), chain.BurnTopic.Hex(), 0xba7c, 7, 1_000_000, 1_700_000_000, shapeTx.Hex(), shapeHash(10).Hex())
}

// blockOf is the block an eth_getBlockByNumber call asks for (10 for a tag).
func blockOf(c hostile.Call) uint64 {
	var n string
	if len(c.Params) > 0 && json.Unmarshal(c.Params[0], &n) == nil && strings.HasPrefix(n, "0x") {
		v, _ := new(big.Int).SetString(n[2:], 16)
		if v != nil {
			return v.Uint64()
		}
	}
	return 10
}

var (
	// logsFlow reads a range's logs: eth_getLogs in a batch with the
	// range's end headers.
	logsFlow = &flow{name: "eth_getLogs", target: "eth_getLogs",
		call: func(ctx context.Context, c *chain.Client) error {
			_, err := c.BurnRange(ctx, []common.Address{shapeContract}, 10, 11)
			return err
		},
		valid: func(c hostile.Call) string { return shapeHeader(blockOf(c)) },
	}
	// receiptsFlow confirms a range's burn in its block's receipts
	// (eth_getBlockReceipts: the header lists no transactions).
	receiptsFlow = &flow{name: "eth_getBlockReceipts", target: "eth_getBlockReceipts", opts: chain.Options{VerifyReceipts: true},
		call: func(ctx context.Context, c *chain.Client) error {
			_, err := c.BurnRange(ctx, []common.Address{shapeContract}, 10, 10)
			return err
		},
		valid: func(c hostile.Call) string {
			if c.Method == "eth_getLogs" {
				return "[" + shapeBurn() + "]"
			}
			return shapeHeader(blockOf(c))
		},
	}
	// receiptFlow confirms it in its transaction's receipt
	// (eth_getTransactionReceipt: the header lists the one transaction).
	receiptFlow = &flow{name: "eth_getTransactionReceipt", target: "eth_getTransactionReceipt", opts: chain.Options{VerifyReceipts: true},
		call: receiptsFlow.call,
		valid: func(c hostile.Call) string {
			if c.Method == "eth_getLogs" {
				return "[" + shapeBurn() + "]"
			}
			return shapeHeader(blockOf(c), shapeTx)
		},
	}
	// headerFlow reads a header in a batch.
	headerFlow = &flow{name: "eth_getBlockByNumber", target: "eth_getBlockByNumber",
		call: func(ctx context.Context, c *chain.Client) error {
			_, err := c.HeadersByNumber(ctx, []uint64{10})
			return err
		},
	}
	// tagFlow reads a header in a call of its own.
	tagFlow = &flow{name: "eth_getBlockByNumber (a call)", target: "eth_getBlockByNumber",
		call: func(ctx context.Context, c *chain.Client) error {
			_, err := c.HeaderByTag(ctx, "latest")
			return err
		},
	}
	// chainIDFlow reads the chain id in a call of its own.
	chainIDFlow = &flow{name: "eth_chainId", target: "eth_chainId",
		call: func(ctx context.Context, c *chain.Client) error {
			_, err := c.ChainID(ctx)
			return err
		},
	}
)

// replyShape is a hostile reply: build makes its large parts (before the
// client is measured) and returns what answers the flow's target request
// from its calls (the other calls of a batch answered by the flow's valid
// results). ok says the reply is one a node may send.
type replyShape struct {
	name  string
	flow  *flow
	ok    bool
	build func() func(calls []hostile.Call, batch bool) [][]byte
}

// gen makes a part of a reply.
type gen func() []byte

// cat is the parts one after another: strings, and what gens make.
func cat(parts ...any) gen {
	return func() []byte {
		var b []byte
		for _, p := range parts {
			switch p := p.(type) {
			case string:
				b = append(b, p...)
			case gen:
				b = append(b, p()...)
			}
		}
		return b
	}
}

// member is the reply to call c: its result, or what body gives.
func member(f *flow, c hostile.Call, body [][]byte) [][]byte {
	if c.Method != f.target {
		v := "null"
		if f.valid != nil {
			v = f.valid(c)
		}
		return [][]byte{[]byte(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"result":` + v + `}`)}
	}
	return append(append([][]byte{[]byte(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,`)}, body...), []byte("}"))
}

// members is the reply to calls, the target's member made by body.
func members(f *flow, calls []hostile.Call, batch bool, body [][]byte) [][]byte {
	var out [][]byte
	if batch {
		out = append(out, []byte("["))
	}
	for i, c := range calls {
		if i > 0 {
			out = append(out, []byte(","))
		}
		out = append(out, member(f, c, body)...)
	}
	if batch {
		out = append(out, []byte("]"))
	}
	return out
}

// custom is a shape whose reply reply makes from the part v makes.
func custom(f *flow, name string, ok bool, v gen, reply func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte) replyShape {
	return replyShape{name: name, flow: f, ok: ok, build: func() func([]hostile.Call, bool) [][]byte {
		b := v()
		return func(calls []hostile.Call, batch bool) [][]byte { return reply(f, b, calls, batch) }
	}}
}

// result is a shape whose target result is what v makes.
func result(f *flow, name string, v gen) replyShape {
	return custom(f, name, false, v, func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
		return members(f, calls, batch, [][]byte{[]byte(`"result":`), v})
	})
}

// errorReply is a shape whose target gets the error e makes.
func errorReply(f *flow, name string, e gen) replyShape {
	return custom(f, name, false, e, func(f *flow, e []byte, calls []hostile.Call, batch bool) [][]byte {
		return members(f, calls, batch, [][]byte{[]byte(`"error":`), e})
	})
}

// repeated is open, then unit repeated to about nearCap bytes, separated
// by sep, then closing.
func repeated(open, unit, sep, closing string) gen {
	return func() []byte {
		n := max(1, (nearCap-len(open)-len(closing))/(len(unit)+len(sep)))
		b := make([]byte, 0, len(open)+n*(len(unit)+len(sep))+len(closing))
		b = append(b, open...)
		for i := range n {
			if i > 0 {
				b = append(b, sep...)
			}
			b = append(b, unit...)
		}
		return append(b, closing...)
	}
}

// huge is a number of about nearCap digits.
var huge gen = func() []byte { return []byte("1" + strings.Repeat("0", nearCap)) }

// long is a string of about nearCap bytes of s.
func long(s string) gen {
	return func() []byte { return []byte(`"` + strings.Repeat(s, nearCap/len(s)) + `"`) }
}

// deep is a value nested about nearCap/2 levels deep.
func deep(open, closing string) gen {
	return func() []byte {
		n := nearCap / 2 / len(open)
		return []byte(strings.Repeat(open, n) + "1" + strings.Repeat(closing, n))
	}
}

// The keys of a log and of a receipt, and a log's and receipt's values
// that are valid.
var (
	logKeys   = []string{"address", "topics", "data", "blockNumber", "transactionHash", "transactionIndex", "blockHash", "logIndex", "removed", "other"}
	shapeHex  = `"0x` + strings.Repeat("00", 32) + `"`
	shapeAddr = `"0x` + strings.Repeat("00", 20) + `"`
	// minimalLog is the shortest log the client takes as one: the four
	// fields it must have.
	minimalLog = `{"address":` + shapeAddr + `,"topics":[],"data":"0x","transactionHash":` + shapeHex + `}`
	// minimalReceipt is the shortest receipt.
	minimalReceipt = `{"transactionHash":` + shapeHex + `,"blockHash":"` + shapeHash(10).Hex() + `","status":"0x1","logs":[]}`
)

// hostileShapes are the replies the client must read at a bounded cost.
func hostileShapes() []replyShape {
	var shapes []replyShape
	add := func(s ...replyShape) { shapes = append(shapes, s...) }
	for _, e := range []string{"{}", "0", "null", "[]", `""`} {
		add(result(logsFlow, "logs of "+e, repeated("[", e, ",", "]")),
			result(receiptsFlow, "receipts of "+e, repeated("[", e, ",", "]")),
			result(receiptsFlow, "a receipt's logs of "+e, repeated(`[{"logs":[`, e, ",", "]}]")),
			result(receiptFlow, "a lone receipt's logs of "+e, repeated(`{"logs":[`, e, ",", "]}")),
			result(logsFlow, "a log's topics of "+e, repeated(`[{"topics":[`, e, ",", "]}]")),
			result(headerFlow, "a header's transactions of "+e, repeated(`{"transactions":[`, e, ",", "]}")),
			result(tagFlow, "a header's transactions of "+e+" (a call)", repeated(`{"transactions":[`, e, ",", "]}")))
	}
	nullLog := `{"address":null,"topics":null,"data":null,"blockNumber":null,"transactionHash":null,"transactionIndex":null,"blockHash":null,"logIndex":null,"removed":null}`
	nullReceipt := `{"transactionHash":null,"blockHash":null,"status":null,"logs":null}`
	nullHeader := `{"number":null,"hash":null,"parentHash":null,"timestamp":null,"logsBloom":null,"transactions":null}`
	add(result(logsFlow, "logs of every field null", repeated("[", nullLog, ",", "]")),
		result(receiptsFlow, "receipts of every field null", repeated("[", nullReceipt, ",", "]")),
		result(receiptsFlow, "a receipt's logs of every field null", repeated(`[{"logs":[`, nullLog, ",", "]}]")),
		result(headerFlow, "a header of every field null, repeated", repeated("{", strings.Trim(nullHeader, "{}"), ",", "}")),
		result(logsFlow, "minimal logs", repeated("[", minimalLog, ",", "]")),
		result(logsFlow, "minimal logs without a transaction hash", repeated("[", strings.Replace(minimalLog, `,"transactionHash":`+shapeHex, "", 1), ",", "]")),
		result(receiptsFlow, "minimal receipts", repeated("[", minimalReceipt, ",", "]")),
		result(receiptsFlow, "a receipt of minimal logs", repeated(`[{"logs":[`, minimalLog, ",", "]}]")),
		custom(headerFlow, "a header of many transactions", true, repeated("", shapeHex, ",", "]}"), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
			h := shapeHeader(10)
			return members(f, calls, batch, [][]byte{[]byte(`"result":`), []byte(h[:len(h)-2]), v})
		}))
	// Huge numbers and long strings in every place of a log, a receipt, a
	// header, a result and an error.
	for _, k := range logKeys {
		add(result(logsFlow, "a log's "+k+" of a huge number", cat(`[{"`+k+`":`, huge, `}]`)),
			result(logsFlow, "a log's "+k+" of a long string", cat(`[{"`+k+`":`, long("a"), `}]`)),
			result(logsFlow, "a log's "+k+" of long escapes", cat(`[{"`+k+`":`, long(`\u0030`), `}]`)),
			result(logsFlow, "a log's "+k+" given again and again", repeated(`[{`, `"`+k+`":`+shapeHex, ",", "}]")))
	}
	for _, k := range []string{"transactionHash", "blockHash", "status", "logs", "other"} {
		add(result(receiptsFlow, "a receipt's "+k+" of a huge number", cat(`[{"`+k+`":`, huge, `}]`)),
			result(receiptsFlow, "a receipt's "+k+" of a long string", cat(`[{"`+k+`":`, long("a"), `}]`)),
			result(receiptsFlow, "a receipt's "+k+" given again and again", repeated(`[{`, `"`+k+`":[]`, ",", "}]")))
	}
	headerValues := map[string]string{"number": `"0xa"`, "hash": shapeHex, "parentHash": shapeHex, "timestamp": `"0x1"`,
		"logsBloom": `"0x` + shapeZeros + `"`, "transactions": `[` + shapeHex + `]`, "other": `"0x1"`}
	for _, k := range []string{"number", "hash", "parentHash", "timestamp", "logsBloom", "transactions", "other"} {
		add(result(headerFlow, "a header's "+k+" given again and again", repeated(`{`, `"`+k+`":`+headerValues[k], ",", "}")),
			result(headerFlow, "a header's "+k+" of a huge number", cat(`{"`+k+`":`, huge, `}`)),
			result(headerFlow, "a header's "+k+" of a long string", cat(`{"`+k+`":`, long("a"), `}`)),
			result(headerFlow, "a header's "+k+" of long hex", cat(`{"`+k+`":"0x`, long("1"), `"}`)))
	}
	add(result(logsFlow, "a log's data of long hex", cat(`[{"address":`+shapeAddr+`,"topics":[],"transactionHash":`+shapeHex+`,"data":"0x`, gen(func() []byte { return []byte(strings.Repeat("00", nearCap/2)) }), `"}]`)),
		result(logsFlow, "a long key", cat(`[{`, long("a"), `:1}]`)),
		result(logsFlow, "a long escaped key", cat(`[{`, long(`\u0061`), `:1}]`)),
		result(logsFlow, "a long key of letters that fold", cat(`[{`, long("ſ"), `:1}]`)),
		result(logsFlow, "nested arrays", deep("[", "]")),
		result(logsFlow, "a log of nested arrays", cat(`[{"other":`, deep("[", "]"), `}]`)),
		result(logsFlow, "a log of nested objects", cat(`[{"other":`, deep(`{"a":`, "}"), `}]`)),
		result(logsFlow, "a result of a long string", long("a")),
		result(logsFlow, "a result of a huge number", huge),
		result(chainIDFlow, "a chain id of a long string", long("a")),
		result(chainIDFlow, "a chain id of long hex", cat(`"0x`, long("1"), `"`)),
		result(chainIDFlow, "a chain id of a huge number", huge),
		result(chainIDFlow, "a chain id of nested arrays", deep("[", "]")),
		result(chainIDFlow, "a chain id of {}", repeated("[", "{}", ",", "]")))
	// Errors.
	for _, f := range []*flow{chainIDFlow, headerFlow} {
		add(errorReply(f, "an error code of a huge number", cat(`{"code":`, huge, `,"message":"m"}`)),
			errorReply(f, "an error code of a long fraction", cat(`{"code":1.`, huge, `,"message":"m"}`)),
			errorReply(f, "an error code of a long string", cat(`{"code":`, long("1"), `,"message":"m"}`)),
			errorReply(f, "an error message of a long string", cat(`{"code":-32000,"message":`, long("a"), `}`)),
			errorReply(f, "an error message of long escapes", cat(`{"code":-32000,"message":`, long(`\u00e9`), `}`)),
			errorReply(f, "an error message of a huge number", cat(`{"code":-32000,"message":`, huge, `}`)),
			errorReply(f, "an error's data of a long string", cat(`{"code":-32000,"message":"m","data":`, long("a"), `}`)),
			errorReply(f, "an error's data of {}", repeated(`{"code":-32000,"message":"m","data":[`, "{}", ",", "]}")),
			errorReply(f, "an error's data of 0", repeated(`{"code":-32000,"message":"m","data":[`, "0", ",", "]}")),
			errorReply(f, "an error's data of nested arrays", cat(`{"code":-32000,"message":"m","data":`, deep("[", "]"), `}`)),
			errorReply(f, "an error's data of a huge number", cat(`{"code":-32000,"message":"m","data":`, huge, `}`)),
			errorReply(f, "an error's data of many fields", repeated(`{"code":-32000,"message":"m","data":{`, `"a":"b"`, ",", "}}")),
			errorReply(f, "an error's other key of a long string", cat(`{"code":-32000,"message":"m","other":`, long("a"), `}`)),
			errorReply(f, "an error's other key of {}", repeated(`{"code":-32000,"message":"m","other":[`, "{}", ",", "]}")),
			errorReply(f, "an error's code given again and again", repeated(`{"message":"m",`, `"code":-32000`, ",", "}")),
			errorReply(f, "an error's message given again and again", repeated(`{"code":-32000,`, `"message":"m"`, ",", "}")),
			errorReply(f, "an error's data given again and again", repeated(`{"code":-32000,"message":"m",`, `"data":"d"`, ",", "}")),
			errorReply(f, "an error's data of an object given again and again", repeated(`{"code":-32000,"message":"m",`, `"data":{"a":"b"}`, ",", "}")),
			errorReply(f, "an error of a long string", long("a")),
			errorReply(f, "an error of a huge number", huge),
			errorReply(f, "an error of {}", repeated("[", "{}", ",", "]")),
			errorReply(f, "an error of nested arrays", deep("[", "]")))
	}
	// Batches and replies whose members or keys are hostile.
	null := [][]byte{[]byte(`"result":null`)}
	add(custom(headerFlow, "a batch of {} after its member", false, repeated("", "{}", ",", "]"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
		return append(append([][]byte{[]byte("[")}, members(f, calls, false, null)...), []byte(","), v)
	}),
		again(headerFlow, "a batch of its member again and again", `"result":null`),
		again(headerFlow, "a batch of its member's error again and again", `"error":{"code":-32000,"message":"m"}`),
		custom(headerFlow, "a batch of errors before their id", false, repeated("", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"m","data":"d"},"id":99}`, ",", "]"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return append(append([][]byte{[]byte("[")}, members(f, calls, false, null)...), []byte(","), v)
		}),
		custom(headerFlow, "a batch of others' members", false, repeated("", `{"jsonrpc":"2.0","id":99,"error":{"code":1}}`, ",", "]"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return append(append([][]byte{[]byte("[")}, members(f, calls, false, null)...), []byte(","), v)
		}),
		custom(headerFlow, "a member's id of a huge number", false, huge, func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return append(append([][]byte{[]byte(`[{"jsonrpc":"2.0","id":`), v, []byte(`,"result":null},`)}, members(f, calls, false, null)...), []byte("]"))
		}),
		custom(headerFlow, "a member's key again and again", false, repeated("", `"jsonrpc":"2.0"`, ",", `,"result":null}]`), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return [][]byte{[]byte(`[{"id":` + string(calls[0].ID) + `,`), v}
		}),
		custom(headerFlow, "a member of a long key", false, long("a"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return [][]byte{[]byte(`[{"id":` + string(calls[0].ID) + `,`), v, []byte(`:1,"result":null}]`)}
		}),
		custom(logsFlow, "a result before its id", false, repeated("[", "{}", ",", "]"), idLast),
		custom(logsFlow, "minimal logs before their id", false, repeated("[", minimalLog, ",", "]"), idLast),
		custom(chainIDFlow, "a long result before its id (a call)", false, long("a"), func(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
			return [][]byte{[]byte(`{"jsonrpc":"2.0","result":`), v, []byte(`,"id":` + string(calls[0].ID) + `}`)}
		}),
		custom(logsFlow, "a result given again and again", true, repeated("", `"result":[]`, ",", ""), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
			return members(f, calls, batch, [][]byte{v})
		}),
		custom(logsFlow, "a result of logs given again and again", false, repeated("", `"result":[`+minimalLog+`]`, ",", ""), func(f *flow, v []byte, calls []hostile.Call, batch bool) [][]byte {
			return members(f, calls, batch, [][]byte{v})
		}),
	)
	return shapes
}

// again is a shape whose batch reply answers the one call with body, again
// and again: the id, known only when the call comes, is 0 over HTTP and 1
// over WebSocket.
func again(f *flow, name, body string) replyShape {
	return replyShape{name: name, flow: f, build: func() func([]hostile.Call, bool) [][]byte {
		byID := map[string][]byte{}
		for _, id := range []string{"0", "1"} {
			byID[id] = repeated("[", `{"jsonrpc":"2.0","id":`+id+`,`+body+`}`, ",", "]")()
		}
		return func(calls []hostile.Call, _ bool) [][]byte { return [][]byte{byID[string(calls[0].ID)]} }
	}}
}

// idLast is a batch reply to calls whose target member gives its result
// v before its id.
func idLast(f *flow, v []byte, calls []hostile.Call, _ bool) [][]byte {
	out := [][]byte{[]byte("[")}
	for i, c := range calls {
		if i > 0 {
			out = append(out, []byte(","))
		}
		if c.Method == f.target {
			out = append(out, []byte(`{"jsonrpc":"2.0","result":`), v, []byte(`,"id":`+string(c.ID)+`}`))
			continue
		}
		out = append(out, member(f, c, nil)...)
	}
	return append(out, []byte("]"))
}

// TestHostileRepliesAreBounded: whatever shape a reply inside the reply
// cap takes (millions of tiny elements, huge numbers and long strings in
// every place, deep nesting, keys given again and again, every field
// null, batches of such members), reading it over HTTP or WebSocket
// allocates at most allocPerByte times its size, and the call gets one
// error of bounded text (or, for a reply a node may send, none).
func TestHostileRepliesAreBounded(t *testing.T) {
	boundedShapes(t, hostileShapes())
}

// boundedShapes reads each of shapes over HTTP and over WebSocket
// (boundedReply).
func boundedShapes(t *testing.T, shapes []replyShape) {
	t.Helper()
	for _, sh := range shapes {
		t.Run(sh.flow.name+": "+sh.name, func(t *testing.T) {
			reply := sh.build()
			for _, ws := range []bool{false, true} {
				t.Run(map[bool]string{false: "over HTTP", true: "over WebSocket"}[ws], func(t *testing.T) {
					boundedReply(t, sh, reply, ws)
				})
			}
		})
	}
}

// boundedReply reads the shape sh, its reply made by reply, through the
// client over HTTP or WebSocket, and fails unless the call allocated at
// most allocPerByte times the reply's size and got one error of bounded
// text (none if sh.ok).
func boundedReply(t *testing.T, sh replyShape, reply func([]hostile.Call, bool) [][]byte, ws bool) {
	t.Helper()
	var size atomic.Int64
	httpURL, wsURL := hostile.Node(t, func(calls []hostile.Call, batch bool) [][]byte {
		target := false
		for _, c := range calls {
			target = target || c.Method == sh.flow.target
		}
		if !target {
			return members(sh.flow, calls, batch, nil)
		}
		pieces := reply(calls, batch)
		n := 0
		for _, p := range pieces {
			n += len(p)
		}
		size.Store(int64(n))
		return pieces
	})
	url := httpURL
	if ws {
		url = wsURL
	}
	opts := sh.flow.opts
	opts.Timeout = time.Minute
	c, err := chain.Dial(t.Context(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var callErr error
	alloc := hostile.Allocated(func() { callErr = sh.flow.call(t.Context(), c) })
	n := size.Load()
	ratio := float64(alloc) / float64(n)
	t.Logf("%.2f MiB reply: %.1f MiB allocated (%.2f × the reply); %v", float64(n)/(1<<20), float64(alloc)/(1<<20), ratio, cut(callErr))
	if n < nearCap/2 {
		t.Fatalf("the reply was %d bytes, want about %d", n, nearCap)
	}
	if (callErr == nil) != sh.ok {
		t.Errorf("error = %v, want an error: %t", cut(callErr), !sh.ok)
	}
	if callErr != nil && len(callErr.Error()) > 1<<10 {
		t.Errorf("a %d-byte error: %s", len(callErr.Error()), cut(callErr))
	}
	if alloc > allocPerByte*uint64(n) {
		t.Errorf("%d bytes allocated for a %d-byte reply (%.2f ×), want at most %d ×", alloc, n, ratio, allocPerByte)
	}
}
