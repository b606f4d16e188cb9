package rpcfault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// fakeNode answers the calls the proxy forwards from a fixed chain: burns
// in blocks 5 and 6, and blocks and transactions named after their number.
type fakeNode struct {
	mu    sync.Mutex
	calls []string // method of every request received, lookups included
}

func blockHash(n uint64) string { return fmt.Sprintf("0x%064x", 0xb0000+n) }
func txHash(n uint64) string    { return fmt.Sprintf("0x%064x", 0x70000+n) }

func burnLog(block, index uint64, payer byte, amount int64) map[string]any {
	data := make([]byte, 64)
	hexAmount := fmt.Sprintf("%064x", amount)
	copy(data, common.FromHex(hexAmount))
	data[63] = 0x42 // timestamp
	return map[string]any{
		"address":          "0x00000000000000000000000000000000000000b0",
		"topics":           []string{chain.BurnTopic.Hex(), fmt.Sprintf("0x%064x", payer), fmt.Sprintf("0x%064x", 0xd0+index)},
		"data":             hexutil.Encode(data),
		"blockNumber":      hexutil.EncodeUint64(block),
		"blockHash":        blockHash(block),
		"transactionHash":  txHash(block*10 + index),
		"transactionIndex": "0x0",
		"logIndex":         hexutil.EncodeUint64(index),
		"removed":          false,
	}
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var reqs []request
	if err := json.Unmarshal(body, &reqs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out []response
	for _, req := range reqs {
		n.mu.Lock()
		n.calls = append(n.calls, req.Method)
		n.mu.Unlock()
		var result any
		switch req.Method {
		case "eth_getLogs":
			result = []any{burnLog(5, 0, 1, 100), burnLog(5, 1, 2, 200), burnLog(6, 0, 3, 300)}
		case "eth_getBlockByHash":
			var h string
			_ = json.Unmarshal(req.Params[0], &h)
			result = map[string]any{"number": hexutil.EncodeUint64(common.HexToHash(h).Big().Uint64() - 0xb0000), "hash": h}
		case "eth_getTransactionByHash":
			var h string
			_ = json.Unmarshal(req.Params[0], &h)
			result = map[string]any{"blockNumber": hexutil.EncodeUint64((common.HexToHash(h).Big().Uint64() - 0x70000) / 10), "hash": h}
		case "eth_getBlockReceipts", "eth_getTransactionReceipt":
			result = []any{}
		case "eth_getBlockByNumber":
			result = map[string]any{"number": "0x5"}
		}
		out = append(out, response{JSONRPC: "2.0", ID: req.ID, Result: mustJSON(result)})
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (n *fakeNode) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, m := range n.calls {
		if m == method {
			c++
		}
	}
	return c
}

func startProxy(t *testing.T) (*Proxy, *fakeNode) {
	t.Helper()
	node := &fakeNode{}
	up := httptest.NewServer(node)
	t.Cleanup(up.Close)
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, node
}

// post sends body to the proxy and returns the decoded replies (a single
// reply is returned as a batch of one).
func post(t *testing.T, p *Proxy, body string) []response {
	t.Helper()
	resp, err := http.Post(p.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		var out []response
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	var one response
	if err := json.Unmarshal(b, &one); err != nil {
		t.Fatal(err)
	}
	return []response{one}
}

func getLogs(from, to uint64) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getLogs","params":[{"fromBlock":"%s","toBlock":"%s"}]}`,
		from, hexutil.EncodeUint64(from), hexutil.EncodeUint64(to))
}

func decodeLogs(t *testing.T, r response) []types.Log {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error reply: %+v", r.Error)
	}
	var logs []types.Log
	if err := json.Unmarshal(r.Result, &logs); err != nil {
		t.Fatal(err)
	}
	return logs
}

func TestForgeBurns(t *testing.T) {
	t.Parallel()
	p, _ := startProxy(t)
	p.Set(func(f *Faults) { f.ForgeBurns = 1 })
	logs := decodeLogs(t, post(t, p, getLogs(1, 9))[0])
	if len(logs) != 4 {
		t.Fatalf("%d logs, want the 3 real ones and a forged one", len(logs))
	}
	forged := logs[2] // after the last log of block 5
	st := p.Stats()
	if st.ForgedLogs != 1 || !slices.Equal(st.ForgedTxIDs, []string{forged.TxHash.Hex()}) {
		t.Fatalf("stats %d forged %v, want 1 with tx %s", st.ForgedLogs, st.ForgedTxIDs, forged.TxHash.Hex())
	}
	real, err := chain.DecodeBurn(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := chain.DecodeBurn(forged)
	if err != nil {
		t.Fatalf("the forged log is not a well-formed burn: %v", err)
	}
	switch {
	case forged.Address != logs[0].Address, forged.Topics[0] != chain.BurnTopic:
		t.Fatal("forged log of another contract or event")
	case forged.BlockNumber != 5 || forged.BlockHash.Hex() != blockHash(5):
		t.Fatalf("forged log in block %d (%s), want block 5 with its hash", forged.BlockNumber, forged.BlockHash.Hex())
	case forged.Index != 0x7f:
		t.Fatalf("forged log index %d, want 0x7f", forged.Index)
	case b.Payer == real.Payer || b.Amount.Cmp(real.Amount) == 0:
		t.Fatal("forged burn has the real payer or amount")
	case b.Timestamp != real.Timestamp:
		t.Fatal("forged burn changed the timestamp")
	}
	if _, _, err := chain.ValidateLogs(logs, []common.Address{logs[0].Address}, 1, 9); err != nil {
		t.Fatalf("the forged reply does not pass validation: %v", err)
	}
	if n := len(decodeLogs(t, post(t, p, getLogs(1, 9))[0])); n != 3 {
		t.Fatalf("%d logs after the fault ran out, want 3", n)
	}
}

func TestHideAllLogs(t *testing.T) {
	t.Parallel()
	p, _ := startProxy(t)
	p.Set(func(f *Faults) { f.HideAllLogs = 1 })
	resp := post(t, p, getLogs(1, 9))[0]
	if string(resp.Result) != "[]" {
		t.Fatalf("reply %s, want []", resp.Result)
	}
	if n := len(decodeLogs(t, post(t, p, getLogs(1, 9))[0])); n != 3 {
		t.Fatalf("%d logs after the fault ran out, want 3", n)
	}
	if st := p.Stats(); st.HiddenLogs != 3 {
		t.Fatalf("HiddenLogs %d, want 3", st.HiddenLogs)
	}
}

func TestPrunedBelow(t *testing.T) {
	t.Parallel()
	p, node := startProxy(t)
	below := uint64(10)
	p.Set(func(f *Faults) { f.PrunedBelow = &below })
	batch := "[" + strings.Join([]string{
		getLogs(5, 12),
		getLogs(10, 12),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":20,"method":"eth_getBlockReceipts","params":["%s"]}`, blockHash(9)),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":21,"method":"eth_getBlockReceipts","params":["%s"]}`, blockHash(10)),
		`{"jsonrpc":"2.0","id":22,"method":"eth_getBlockReceipts","params":["0x3"]}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","id":23,"method":"eth_getTransactionReceipt","params":["%s"]}`, txHash(31)),
		fmt.Sprintf(`{"jsonrpc":"2.0","id":24,"method":"eth_getTransactionReceipt","params":["%s"]}`, txHash(120)),
		`{"jsonrpc":"2.0","id":25,"method":"eth_getBlockByNumber","params":["0x5",false]}`,
	}, ",") + "]"
	got := post(t, p, batch)
	pruned := []bool{true, false, true, false, true, true, false, false}
	for i, r := range got {
		isPruned := r.Error != nil && r.Error.Code == 4444 && r.Error.Message == "pruned history unavailable"
		if isPruned != pruned[i] || (!pruned[i] && r.Error != nil) {
			t.Errorf("request %d (id %s): error %+v, want pruned %v", i, r.ID, r.Error, pruned[i])
		}
	}
	if st := p.Stats(); st.PrunedReplies != 4 || !slices.Equal(st.ServedRanges, [][2]uint64{{10, 12}}) {
		t.Fatalf("PrunedReplies %d, ServedRanges %v; want 4 and [[10 12]]", st.PrunedReplies, st.ServedRanges)
	}
	// Only the served requests reached the node, besides the hash lookups.
	if node.count("eth_getLogs") != 1 || node.count("eth_getBlockReceipts") != 1 || node.count("eth_getTransactionReceipt") != 1 {
		t.Fatalf("node saw %v", node.calls)
	}
	// A single request is answered the same way.
	if r := post(t, p, getLogs(0, 3))[0]; r.Error == nil || r.Error.Code != 4444 {
		t.Fatalf("single eth_getLogs below the pruning point: %+v", r)
	}
}

// TestStatsCountEveryCallAndTheBytesServed: a batch is one request, each of
// its members one call of its method, and the bytes are those of the bodies
// the client received.
func TestStatsCountEveryCallAndTheBytesServed(t *testing.T) {
	t.Parallel()
	p, _ := startProxy(t)
	var served int64
	for _, body := range []string{"[" + getLogs(1, 2) + "," + getLogs(3, 4) + "]", getLogs(5, 5)} {
		resp, err := http.Post(p.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		served += int64(len(b))
	}
	s := p.Stats()
	if s.Requests != 2 || s.Calls["eth_getLogs"] != 3 || s.ResponseBytes != served || served == 0 {
		t.Fatalf("requests %d, calls %v, bytes %d; want 2, 3 eth_getLogs, %d", s.Requests, s.Calls, s.ResponseBytes, served)
	}
}

// TestCutReplies: a reply carrying receipts is sent half, then the
// connection closes; a reply without receipts, and the receipts reply
// after the fault, come whole.
func TestCutReplies(t *testing.T) {
	t.Parallel()
	p, _ := startProxy(t)
	p.Set(func(f *Faults) { f.CutReplies = 1 })
	receipts := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionReceipt","params":["%s"]}`, txHash(5))
	if got := post(t, p, getLogs(1, 9)); len(got) != 1 || got[0].Error != nil {
		t.Fatalf("eth_getLogs under CutReplies: %+v, want it whole", got)
	}
	resp, err := http.Post(p.URL, "application/json", strings.NewReader(receipts))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || resp.ContentLength <= int64(len(b)) {
		t.Fatalf("read %d of %d bytes, %v; want the reply cut short", len(b), resp.ContentLength, err)
	}
	if got := post(t, p, receipts); len(got) != 1 || got[0].Error != nil || len(got[0].Result) == 0 {
		t.Fatalf("the receipt after the fault: %+v, want it whole", got)
	}
	if st := p.Stats(); st.CutReplies != 1 {
		t.Fatalf("CutReplies stat %d, want 1", st.CutReplies)
	}
}

// headNode answers eth_blockNumber and eth_getBlockByNumber for a chain at
// head 20 whose finalized block is final.
type headNode struct {
	mu    sync.Mutex
	final uint64
}

func (n *headNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var reqs []request
	if err := json.Unmarshal(body, &reqs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	final := n.final
	n.mu.Unlock()
	block := func(num uint64) map[string]any {
		return map[string]any{"number": hexutil.EncodeUint64(num), "hash": blockHash(num)}
	}
	var out []response
	for _, req := range reqs {
		var result any
		switch req.Method {
		case "eth_blockNumber":
			result = hexutil.EncodeUint64(20)
		case "eth_getBlockByNumber":
			var tag string
			_ = json.Unmarshal(req.Params[0], &tag)
			switch tag {
			case "latest", "safe":
				result = block(20)
			case "finalized":
				result = block(final)
			default:
				num, _ := hexutil.DecodeUint64(tag)
				if num <= 20 {
					result = block(num)
				}
			}
		}
		out = append(out, response{JSONRPC: "2.0", ID: req.ID, Result: mustJSON(result)})
	}
	_ = json.NewEncoder(w).Encode(out)
}

// TestLagAtHoldsAStillHeadWhileFinalityCatchesUp: LagAt is also a head
// standing still at block N (a chain that seals only when it has a
// transaction): eth_blockNumber, latest and every block above N are held
// there, while the node's finalized block passes through as it is up to
// N, and resolves to N once the node finalized past it.
func TestLagAtHoldsAStillHeadWhileFinalityCatchesUp(t *testing.T) {
	t.Parallel()
	node := &headNode{final: 6}
	up := httptest.NewServer(node)
	t.Cleanup(up.Close)
	p, err := Start(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	held := uint64(8)
	p.Set(func(f *Faults) { f.LagAt = &held })

	number := func(r response) string {
		t.Helper()
		if r.Error != nil {
			t.Fatalf("error reply: %+v", r.Error)
		}
		if string(r.Result) == "null" {
			return "null"
		}
		var v struct {
			Number string `json:"number"`
		}
		if json.Unmarshal(r.Result, &v) == nil && v.Number != "" {
			return v.Number
		}
		var s string
		_ = json.Unmarshal(r.Result, &s)
		return s
	}
	ask := func() []string {
		var got []string
		for _, r := range post(t, p, `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]},
			{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["latest",false]},
			{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["finalized",false]},
			{"jsonrpc":"2.0","id":4,"method":"eth_getBlockByNumber","params":["0x8",false]},
			{"jsonrpc":"2.0","id":5,"method":"eth_getBlockByNumber","params":["0x9",false]}]`) {
			got = append(got, number(r))
		}
		return got
	}
	if got, want := ask(), []string{"0x8", "0x8", "0x6", "0x8", "null"}; !slices.Equal(got, want) {
		t.Fatalf("the head held at 8, finalized 6: %v, want %v", got, want)
	}
	node.mu.Lock()
	node.final = 12
	node.mu.Unlock()
	if got, want := ask(), []string{"0x8", "0x8", "0x8", "0x8", "null"}; !slices.Equal(got, want) {
		t.Fatalf("the head held at 8, the node finalized 12: %v, want %v", got, want)
	}
}
