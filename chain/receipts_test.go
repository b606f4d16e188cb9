package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// otherContract is a burn contract the tests do not ask for.
var otherContract = common.HexToAddress("0x00000000000000000000000000000000000000b2")

// rcpt is a transaction receipt as a node serves it.
type rcpt struct {
	TxHash    common.Hash    `json:"transactionHash"`
	BlockHash common.Hash    `json:"blockHash"`
	Status    hexutil.Uint64 `json:"status"`
	Logs      []types.Log    `json:"logs"`
}

// receiptsOf groups logs into successful receipts, one per transaction, by
// block number.
func receiptsOf(logs ...types.Log) map[uint64][]rcpt {
	out := map[uint64][]rcpt{}
	for _, l := range logs {
		rs := out[l.BlockNumber]
		i := slices.IndexFunc(rs, func(r rcpt) bool { return r.TxHash == l.TxHash })
		if i < 0 {
			rs = append(rs, rcpt{TxHash: l.TxHash, BlockHash: hashOf(l.BlockNumber), Status: 1, Logs: []types.Log{}})
			i = len(rs) - 1
		}
		rs[i].Logs = append(rs[i].Logs, l)
		out[l.BlockNumber] = rs
	}
	return out
}

// receiptNode is a consistent chain whose block n has hash hashOf(n): the
// test sets its eth_getLogs reply, its blocks' receipts and logsBloom. It
// records every HTTP request (a batch is one) and the arguments of the
// receipt calls.
type receiptNode struct {
	mu sync.Mutex
	// logs is the eth_getLogs reply (those inside the asked range).
	logs     []types.Log
	receipts map[uint64][]rcpt
	blooms   map[uint64]types.Bloom
	// txs, when set for a block, are the transactions its header lists.
	txs map[uint64][]common.Hash
	// finalized is the block the "finalized" tag names; head the last
	// block (0: no limit).
	finalized, head uint64
	// blockReceiptsErr, when set, is the reply to eth_getBlockReceipts.
	blockReceiptsErr error

	requests      [][]string // the methods of each HTTP request
	blockReceipts []uint64
	txReceipts    []common.Hash
	addresses     []string // the raw "address" of each eth_getLogs filter
}

func (n *receiptNode) handle(method string, params []json.RawMessage) (any, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch method {
	case "eth_chainId":
		return hexutil.Uint64(1337), nil
	case "eth_getLogs":
		var f struct {
			From    hexutil.Uint64  `json:"fromBlock"`
			To      hexutil.Uint64  `json:"toBlock"`
			Address json.RawMessage `json:"address"`
		}
		if err := json.Unmarshal(params[0], &f); err != nil {
			return nil, err
		}
		n.addresses = append(n.addresses, string(f.Address))
		out := []types.Log{}
		for _, l := range n.logs {
			if l.BlockNumber >= uint64(f.From) && l.BlockNumber <= uint64(f.To) {
				out = append(out, l)
			}
		}
		return out, nil
	case "eth_getBlockByNumber":
		var num hexutil.Uint64
		var tag string
		switch {
		case json.Unmarshal(params[0], &tag) == nil && tag == "finalized":
			num = hexutil.Uint64(n.finalized)
		case tag == "latest":
			num = hexutil.Uint64(n.head)
		case json.Unmarshal(params[0], &num) != nil:
			return nil, fmt.Errorf("block %s", params[0])
		case n.head > 0 && uint64(num) > n.head:
			return nil, nil
		}
		h := header(uint64(num), hashOf(uint64(num)), hashOf(uint64(num)-1))
		if b, ok := n.blooms[uint64(num)]; ok {
			h["logsBloom"] = b
		}
		if txs, ok := n.txs[uint64(num)]; ok {
			h["transactions"] = txs
		}
		return h, nil
	case "eth_getBlockByHash":
		var hash common.Hash
		if err := json.Unmarshal(params[0], &hash); err != nil {
			return nil, err
		}
		num := hash.Big().Uint64() - 1000
		txs := []common.Hash{}
		for _, r := range n.receipts[num] {
			txs = append(txs, r.TxHash)
		}
		return map[string]any{"hash": hash, "number": hexutil.Uint64(num), "transactions": txs}, nil
	case "eth_getBlockReceipts":
		var num hexutil.Uint64
		if err := json.Unmarshal(params[0], &num); err != nil {
			return nil, err
		}
		n.blockReceipts = append(n.blockReceipts, uint64(num))
		if n.blockReceiptsErr != nil {
			return nil, n.blockReceiptsErr
		}
		rs := n.receipts[uint64(num)]
		if rs == nil {
			rs = []rcpt{} // a block without transactions
		}
		return rs, nil
	case "eth_getTransactionReceipt":
		var tx common.Hash
		if err := json.Unmarshal(params[0], &tx); err != nil {
			return nil, err
		}
		n.txReceipts = append(n.txReceipts, tx)
		for _, rs := range n.receipts {
			for _, r := range rs {
				if r.TxHash == tx {
					return r, nil
				}
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected %s", method)
}

// requestMethods lists the methods of every request, a batch as "a+b".
func (n *receiptNode) requestMethods() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, r := range n.requests {
		out = append(out, strings.Join(r, "+"))
	}
	return out
}

// calls counts the calls of method.
func (n *receiptNode) calls(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, r := range n.requests {
		for _, m := range r {
			if m == method {
				c++
			}
		}
	}
	return c
}

// serveRecording serves handle as a JSON-RPC node, calling record with the
// methods of each HTTP request before it is answered.
func serveRecording(t *testing.T, handle func(string, []json.RawMessage) (any, error), record func([]string)) string {
	t.Helper()
	f := &fakeNode{handle: handle}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var reqs []rpcReq
		if json.Unmarshal(body, &reqs) != nil {
			var one rpcReq
			_ = json.Unmarshal(body, &one)
			reqs = []rpcReq{one}
		}
		methods := make([]string, len(reqs))
		for i, q := range reqs {
			methods[i] = q.Method
		}
		if record != nil {
			record(methods)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// start serves the node and dials a client with opts; its observer is a
// fresh faultObs unless opts has one.
func (n *receiptNode) start(t *testing.T, opts chain.Options) (*chain.Client, *faultObs) {
	t.Helper()
	url := serveRecording(t, n.handle, func(methods []string) {
		n.mu.Lock()
		n.requests = append(n.requests, methods)
		n.mu.Unlock()
	})
	obs := &faultObs{}
	if opts.Observer == nil {
		opts.Observer = obs
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	c, err := chain.Dial(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, obs
}

// faultObs records node faults and quorum disagreements besides what an
// endpointsObs records.
type faultObs struct {
	endpointsObs
	fmu       sync.Mutex
	faults    []string // kind=n, in order
	disagreed []string // endpoints
}

func (o *faultObs) NodeFault(_, kind string, n int) {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	o.faults = append(o.faults, fmt.Sprintf("%s=%d", kind, n))
}

func (o *faultObs) Disagreement(endpoint string) {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	o.disagreed = append(o.disagreed, endpoint)
}

func (o *faultObs) faultList() string {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	return strings.Join(o.faults, ",")
}

func (o *faultObs) disagreements() []string {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	return slices.Clone(o.disagreed)
}

// burnKeys names burns as block/index/tx=amount, in order.
func burnKeys(bs []chain.Burn) string {
	var out []string
	for _, b := range bs {
		out = append(out, fmt.Sprintf("%d/%d/%02x=%s", b.BlockNumber, b.LogIndex, b.TxHash[31], b.Amount))
	}
	return strings.Join(out, ",")
}

// wantBadReply fails the test unless err is a ClassBadReply error wrapping
// chain.ErrBadReply.
func wantBadReply(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("BurnRange succeeded, want a bad reply")
	}
	if !errors.Is(err, chain.ErrBadReply) || chain.ClassOf(err) != chain.ClassBadReply {
		t.Fatalf("BurnRange = %v (class %s), want ErrBadReply of ClassBadReply", err, chain.ClassOf(err))
	}
}

// burnBloom is a logsBloom holding the burn topic and addrs.
func burnBloom(addrs ...common.Address) types.Bloom {
	var b types.Bloom
	b.Add(chain.BurnTopic.Bytes())
	for _, a := range addrs {
		b.Add(a.Bytes())
	}
	return b
}

func TestReceiptsConfirmBurnsInOneBatch(t *testing.T) {
	t.Parallel()
	l1, l2 := burnLog(12, 1, 3, big.NewInt(5), 1), burnLog(15, 2, 0, big.NewInt(7), 2)
	n := &receiptNode{logs: []types.Log{l1, l2}, receipts: receiptsOf(l1, l2)}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), "12/3/01=5,15/0/02=7"; got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if r.Hidden != 0 || r.From.Number != 10 || r.To.Number != 20 {
		t.Fatalf("range %d..%d hidden %d", r.From.Number, r.To.Number, r.Hidden)
	}
	// The receipts, asked by block number, carry the blocks' hashes: no
	// header is read besides the range's ends.
	want := []string{
		"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber",
		"eth_getBlockReceipts+eth_getBlockReceipts",
	}
	if got := n.requestMethods(); !slices.Equal(got, want) {
		t.Fatalf("requests %q, want %q", got, want)
	}
	if got := fmt.Sprint(n.blockReceipts); got != "[12 15]" {
		t.Fatalf("eth_getBlockReceipts asked for %s, want blocks 12 and 15", got)
	}
	if f := obs.faultList(); f != "" {
		t.Fatalf("faults %s, want none", f)
	}
}

func TestReceiptsRefuseAForgedBurn(t *testing.T) {
	t.Parallel()
	real := burnLog(12, 1, 0, big.NewInt(5), 1)
	forged := burnLog(14, 9, 2, big.NewInt(1_000_000), 1) // canonical hash, no receipt holds it
	n := &receiptNode{logs: []types.Log{real, forged}, receipts: receiptsOf(real)}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	wantBadReply(t, err)
	if r.Burns != nil || r.To.Number != 0 {
		t.Fatalf("a range came back with the error: %+v", r)
	}
	if f := obs.faultList(); f != "unconfirmed_burn=1" {
		t.Fatalf("faults %q, want unconfirmed_burn=1", f)
	}
	if bad := obs.got; !slices.Contains(bad, "eth_getLogs=bad reply") {
		t.Fatalf("observed %v, want eth_getLogs=bad reply", bad)
	}
}

func TestReceiptsRefuseALogThatDiffersFromItsReceipt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		receipt func(*rcpt)
	}{
		{"another amount", func(r *rcpt) { r.Logs[0].Data = append(word(big.NewInt(6)), word(big.NewInt(1))...) }},
		{"another digest topic", func(r *rcpt) {
			r.Logs[0].Topics = []common.Hash{chain.BurnTopic, common.BytesToHash(payer.Bytes()), common.HexToHash("0x33")}
		}},
		{"another payer topic", func(r *rcpt) {
			r.Logs[0].Topics = []common.Hash{chain.BurnTopic, common.BytesToHash(otherContract.Bytes()), digest}
		}},
		{"another contract", func(r *rcpt) { r.Logs[0].Address = otherContract }},
		{"failed transaction", func(r *rcpt) { r.Status = 0 }},
		{"another log index", func(r *rcpt) { r.Logs[0].Index = 1 }},
		{"no logs", func(r *rcpt) { r.Logs = []types.Log{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := burnLog(12, 1, 0, big.NewInt(5), 1)
			rs := receiptsOf(burnLog(12, 1, 0, big.NewInt(5), 1))
			tt.receipt(&rs[12][0])
			n := &receiptNode{logs: []types.Log{l}, receipts: rs}
			c, obs := n.start(t, chain.Options{VerifyReceipts: true})
			r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
			wantBadReply(t, err)
			if len(r.Burns) != 0 {
				t.Fatalf("burns returned with the error: %v", burnKeys(r.Burns))
			}
			if f := obs.faultList(); f != "unconfirmed_burn=1" {
				t.Fatalf("faults %q, want unconfirmed_burn=1", f)
			}
		})
	}
}

func TestReceiptsOfAnotherBlockAreABadReply(t *testing.T) {
	t.Parallel()
	l := burnLog(12, 1, 0, big.NewInt(5), 1)
	rs := receiptsOf(l)
	rs[12][0].BlockHash = common.HexToHash("0xbad")
	n := &receiptNode{logs: []types.Log{l}, receipts: rs}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	_, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	wantBadReply(t, err)
	if !slices.Contains(obs.got, "eth_getBlockReceipts=bad reply") {
		t.Fatalf("observed %v, want eth_getBlockReceipts=bad reply", obs.got)
	}
	if f := obs.faultList(); f != "" {
		t.Fatalf("faults %q, want none: the receipts, not the logs, are wrong", f)
	}
}

func TestReceiptsFallBackToTransactionReceipts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{"-32601", &jsonRPCError{-32601, "the method eth_getBlockReceipts does not exist/is not available"}},
		{"-32602", &jsonRPCError{-32602, "invalid argument 0: hex string has length 64, want 16 for hexutil.Uint64"}},
		{"-32600 unsupported method text", &jsonRPCError{-32600, "Unsupported method: eth_getBlockReceipts"}},
		// A provider's words under a generic code: the text alone says
		// the method is missing.
		{"-32000 method not found text", &jsonRPCError{-32000, "Method not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l1, l2, l3 := burnLog(12, 1, 0, big.NewInt(5), 1), burnLog(12, 2, 1, big.NewInt(6), 1), burnLog(15, 3, 0, big.NewInt(7), 2)
			n := &receiptNode{logs: []types.Log{l1, l2, l3}, receipts: receiptsOf(l1, l2, l3), blockReceiptsErr: tt.err}
			c, obs := n.start(t, chain.Options{VerifyReceipts: true})
			ctx := context.Background()
			r, err := c.BurnRange(ctx, []common.Address{contract}, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := burnKeys(r.Burns), "12/0/01=5,12/1/02=6,15/0/03=7"; got != want {
				t.Fatalf("burns %s, want %s", got, want)
			}
			if got := n.calls("eth_getBlockReceipts"); got != 2 {
				t.Fatalf("eth_getBlockReceipts called %d times, want 2 (one batch)", got)
			}
			if got, want := fmt.Sprint(n.txReceipts), fmt.Sprint([]common.Hash{l1.TxHash, l2.TxHash, l3.TxHash}); got != want {
				t.Fatalf("eth_getTransactionReceipt for %s, want %s", got, want)
			}
			// The node is known to lack it now.
			if _, err := c.BurnRange(ctx, []common.Address{contract}, 10, 20); err != nil {
				t.Fatal(err)
			}
			if got := n.calls("eth_getBlockReceipts"); got != 2 {
				t.Fatalf("eth_getBlockReceipts called %d times after the fallback, want still 2", got)
			}
			if got := n.calls("eth_getTransactionReceipt"); got != 6 {
				t.Fatalf("eth_getTransactionReceipt called %d times, want 6", got)
			}
			if f := obs.faultList(); f != "" {
				t.Fatalf("faults %q, want none", f)
			}
		})
	}
}

// A failure of eth_getBlockReceipts that does not say the method is
// missing is no reason to fall back: BurnRange fails with it.
func TestReceiptsOtherFailureDoesNotFallBack(t *testing.T) {
	t.Parallel()
	l := burnLog(12, 1, 0, big.NewInt(5), 1)
	n := &receiptNode{logs: []types.Log{l}, receipts: receiptsOf(l), blockReceiptsErr: errors.New("internal error")}
	c, _ := n.start(t, chain.Options{VerifyReceipts: true})
	_, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	if err == nil || chain.ClassOf(err) != chain.ClassTransient {
		t.Fatalf("BurnRange = %v, want a transient error", err)
	}
	if got := n.calls("eth_getTransactionReceipt"); got != 0 {
		t.Fatalf("eth_getTransactionReceipt called %d times, want 0", got)
	}
}

func TestBloomFindsBurnsTheReplyLeftOut(t *testing.T) {
	t.Parallel()
	hidden := burnLog(20, 7, 4, big.NewInt(42), 3)
	tests := []struct {
		name          string
		bloom         types.Bloom
		receipts      map[uint64][]rcpt
		noBlockRcpts  bool // the node has no eth_getBlockReceipts
		want          string
		hidden        int
		faults        string
		wantRcptCalls bool
	}{
		{"hidden burn", burnBloom(contract), receiptsOf(hidden), false, "20/4/07=42", 1, "hidden_burn=1", true},
		{"hidden burn, receipts by transaction", burnBloom(contract), receiptsOf(hidden), true, "20/4/07=42", 1, "hidden_burn=1", true},
		{"false positive", burnBloom(contract), receiptsOf(burnLog(20, 7, 4, big.NewInt(42), 3)), false, "", 0, "", true},
		{"bloom of another contract", burnBloom(otherContract), receiptsOf(hidden), false, "", 0, "", false},
		{"bloom without the burn topic", func() types.Bloom {
			var b types.Bloom
			b.Add(contract.Bytes())
			return b
		}(), receiptsOf(hidden), false, "", 0, "", false},
		{"no bloom", types.Bloom{}, receiptsOf(hidden), false, "", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs := tt.receipts
			if tt.name == "false positive" {
				// The block's only transaction emitted no burn.
				rs[20][0].Logs = []types.Log{}
			}
			n := &receiptNode{receipts: rs, blooms: map[uint64]types.Bloom{}}
			if tt.bloom != (types.Bloom{}) {
				n.blooms[20] = tt.bloom
			}
			if tt.noBlockRcpts {
				n.blockReceiptsErr = &jsonRPCError{-32601, "method not found"}
			}
			c, obs := n.start(t, chain.Options{})
			r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if got := burnKeys(r.Burns); got != tt.want {
				t.Fatalf("burns %q, want %q", got, tt.want)
			}
			if r.Hidden != tt.hidden {
				t.Fatalf("Hidden = %d, want %d", r.Hidden, tt.hidden)
			}
			if f := obs.faultList(); f != tt.faults {
				t.Fatalf("faults %q, want %q", f, tt.faults)
			}
			calls := n.calls("eth_getBlockReceipts") + n.calls("eth_getTransactionReceipt")
			if tt.wantRcptCalls != (calls > 0) {
				t.Fatalf("requests %q; receipts wanted: %v", n.requestMethods(), tt.wantRcptCalls)
			}
			if !tt.wantRcptCalls {
				if got := n.requestMethods(); !slices.Equal(got, []string{"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber"}) {
					t.Fatalf("requests %q, want the one batch", got)
				}
			}
			if tt.noBlockRcpts && n.calls("eth_getTransactionReceipt") != 1 {
				t.Fatalf("requests %q, want one eth_getTransactionReceipt", n.requestMethods())
			}
		})
	}
}

func TestReceiptsAddAHiddenBurnInChainOrder(t *testing.T) {
	t.Parallel()
	replied1 := burnLog(12, 2, 3, big.NewInt(5), 1)
	replied2 := burnLog(15, 4, 0, big.NewInt(9), 2)
	hidden := burnLog(12, 1, 1, big.NewInt(7), 1)
	n := &receiptNode{logs: []types.Log{replied1, replied2}, receipts: receiptsOf(hidden, replied1, replied2)}
	c, obs := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := burnKeys(r.Burns), "12/1/01=7,12/3/02=5,15/0/04=9"; got != want {
		t.Fatalf("burns %s, want %s", got, want)
	}
	if r.Hidden != 1 {
		t.Fatalf("Hidden = %d, want 1", r.Hidden)
	}
	if f := obs.faultList(); f != "hidden_burn=1" {
		t.Fatalf("faults %q, want hidden_burn=1", f)
	}
}

func TestReceiptsIgnoreBurnsOfOtherContracts(t *testing.T) {
	t.Parallel()
	l := burnLog(12, 1, 0, big.NewInt(5), 1)
	foreign := burnLog(12, 1, 1, big.NewInt(1_000), 1)
	foreign.Address = otherContract
	foreignTx := burnLog(12, 2, 2, big.NewInt(2_000), 1)
	foreignTx.Address = otherContract
	for _, verify := range []bool{true, false} {
		t.Run(fmt.Sprintf("verify=%v", verify), func(t *testing.T) {
			t.Parallel()
			n := &receiptNode{
				logs:     []types.Log{l},
				receipts: receiptsOf(l, foreign, foreignTx),
				// The bloom holds both contracts: the block is read for it too.
				blooms: map[uint64]types.Bloom{20: burnBloom(contract, otherContract)},
			}
			n.receipts[20] = receiptsOf(burnLog(20, 3, 0, big.NewInt(3), 1))[20]
			n.receipts[20][0].Logs[0].Address = otherContract
			c, obs := n.start(t, chain.Options{VerifyReceipts: verify})
			r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := burnKeys(r.Burns), "12/0/01=5"; got != want {
				t.Fatalf("burns %s, want %s", got, want)
			}
			if r.Hidden != 0 || len(r.Rejected) != 0 {
				t.Fatalf("Hidden = %d, rejected %d; want 0 and 0", r.Hidden, len(r.Rejected))
			}
			if f := obs.faultList(); f != "" {
				t.Fatalf("faults %q, want none", f)
			}
			if n.calls("eth_getBlockReceipts") == 0 {
				t.Fatal("no receipts were read")
			}
		})
	}
}

func TestBurnRangeContractsFilterAddress(t *testing.T) {
	t.Parallel()
	second := otherContract
	tests := []struct {
		name      string
		contracts []common.Address
		want      string
		burns     string
	}{
		{"one contract", []common.Address{contract}, `"` + strings.ToLower(contract.Hex()) + `"`, "12/0/01=5"},
		{"two contracts", []common.Address{contract, second},
			`["` + strings.ToLower(contract.Hex()) + `","` + strings.ToLower(second.Hex()) + `"]`, "12/0/01=5,14/0/02=6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mine := burnLog(12, 1, 0, big.NewInt(5), 1)
			theirs := burnLog(14, 2, 0, big.NewInt(6), 1)
			theirs.Address = second
			logs := []types.Log{mine}
			if len(tt.contracts) == 2 {
				logs = append(logs, theirs)
			}
			n := &receiptNode{logs: logs, receipts: receiptsOf(mine, theirs)}
			c, _ := n.start(t, chain.Options{VerifyReceipts: true})
			r, err := c.BurnRange(context.Background(), tt.contracts, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.ToLower(strings.Join(n.addresses, ";")); got != tt.want {
				t.Fatalf("filter address %s, want %s", got, tt.want)
			}
			if got := burnKeys(r.Burns); got != tt.burns {
				t.Fatalf("burns %s, want %s", got, tt.burns)
			}
			if r.Hidden != 0 {
				t.Fatalf("Hidden = %d, want 0", r.Hidden)
			}
		})
	}
}

// TestReceiptsBatchShrinksToTheReplyCap: receipts are asked for up to 32
// blocks per batch; a reply over the cap is halved until it fits, and the
// client keeps the size that fit for its next batches.
func TestReceiptsBatchShrinksToTheReplyCap(t *testing.T) {
	t.Parallel()
	n := &receiptNode{receipts: map[uint64][]rcpt{}}
	for b := uint64(10); b < 50; b++ {
		l := burnLog(b, byte(b), 0, big.NewInt(int64(b)), 1)
		n.logs = append(n.logs, l)
		pad := types.Log{Address: otherContract, Topics: []common.Hash{{1}}, Data: make([]byte, 4096),
			BlockNumber: b, BlockHash: hashOf(b), TxHash: l.TxHash, Index: 1}
		n.receipts[b] = []rcpt{{TxHash: l.TxHash, BlockHash: hashOf(b), Status: 1, Logs: []types.Log{l, pad}}}
	}
	// About 9 KB of receipts a block: 32 or 16 blocks are over 100 KB, 8 are not.
	c, _ := n.start(t, chain.Options{VerifyReceipts: true, MaxResponseBytes: 100_000})
	batches := func(from int) []int {
		var sizes []int
		for _, m := range n.requestMethods()[from:] {
			if strings.HasPrefix(m, "eth_getBlockReceipts") {
				sizes = append(sizes, strings.Count(m, "+")+1)
			}
		}
		return sizes
	}
	// Batches travel several at a time, so the first round's order (and
	// whether the second half of a refused 32 is asked as 16 or as two 8s)
	// depends on which reply comes first: one batch of 32 blocks, halves of
	// it, five of 8 blocks in all; and once 8 fits, every later batch is 8.
	for round := range 2 {
		before := len(n.requestMethods())
		r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 49)
		if err != nil || len(r.Burns) != 40 {
			t.Fatalf("round %d: %d burns, %v", round, len(r.Burns), err)
		}
		got := batches(before)
		count := map[int]int{}
		for _, size := range got {
			count[size]++
		}
		switch {
		case round == 0 && (count[32] != 1 || count[8] != 5 || count[16]+6 != len(got)):
			t.Fatalf("round 0: receipts batches of %v blocks, want 32, then halves, five of 8 blocks", got)
		case round == 1 && !slices.Equal(got, []int{8, 8, 8, 8, 8}):
			t.Fatalf("round 1: receipts batches of %v blocks, want [8 8 8 8 8]", got)
		}
	}
}

// TestHeadersOnlyWhereTheChecksNeedThem: with the receipts check, the
// receipts of the blocks holding logs, asked by number, carry their
// canonical hashes, and only the range's ends are read as headers; without
// it, the headers of the blocks holding logs are read instead.
func TestHeadersOnlyWhereTheChecksNeedThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		verify bool
		want   []string
	}{
		{"receipts check", true, []string{
			"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber",
			"eth_getBlockReceipts+eth_getBlockReceipts+eth_getBlockReceipts",
		}},
		{"no receipts check", false, []string{
			"eth_getLogs+eth_getBlockByNumber+eth_getBlockByNumber",
			"eth_getBlockByNumber+eth_getBlockByNumber+eth_getBlockByNumber",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := []types.Log{burnLog(11, 1, 0, big.NewInt(5), 1), burnLog(12, 2, 0, big.NewInt(6), 1), burnLog(17, 3, 0, big.NewInt(7), 1)}
			n := &receiptNode{logs: ls, receipts: receiptsOf(ls...)}
			c, obs := n.start(t, chain.Options{VerifyReceipts: tt.verify})
			r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := burnKeys(r.Burns), "11/0/01=5,12/0/02=6,17/0/03=7"; got != want {
				t.Fatalf("burns %s, want %s", got, want)
			}
			if got := n.requestMethods(); !slices.Equal(got, tt.want) {
				t.Fatalf("requests %q, want %q", got, tt.want)
			}
			if f := obs.faultList(); f != "" {
				t.Fatalf("faults %q, want none", f)
			}
		})
	}
}

// TestReceiptsThatDisagreeOnTheirBlockAreABadReply: a block's receipts,
// asked by number, must all be of one block, the one its logs name.
func TestReceiptsThatDisagreeOnTheirBlockAreABadReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		bend  func(rs map[uint64][]rcpt)
		fault string
	}{
		{"two blocks in one block's receipts", func(rs map[uint64][]rcpt) { rs[12][1].BlockHash = common.HexToHash("0xbad") }, ""},
		{"receipts of another block than the logs name", func(rs map[uint64][]rcpt) {
			rs[12][0].BlockHash = common.HexToHash("0xbad")
			rs[12][1].BlockHash = common.HexToHash("0xbad")
		}, ""},
		{"no receipts at all: the burns are unconfirmed", func(rs map[uint64][]rcpt) { delete(rs, 12) }, "unconfirmed_burn=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ls := []types.Log{burnLog(12, 1, 0, big.NewInt(5), 1), burnLog(12, 2, 1, big.NewInt(6), 1)}
			rs := receiptsOf(ls...)
			tt.bend(rs)
			n := &receiptNode{logs: ls, receipts: rs}
			c, obs := n.start(t, chain.Options{VerifyReceipts: true})
			r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
			wantBadReply(t, err)
			if len(r.Burns) != 0 {
				t.Fatalf("burns returned with the error: %s", burnKeys(r.Burns))
			}
			if f := obs.faultList(); f != tt.fault {
				t.Fatalf("faults %q, want %q", f, tt.fault)
			}
		})
	}
}

// TestReceiptsOfADenseRangeGoAsSeveralRequests: a range's receipts are
// split into batches of about a thousand of the reply's logs, which travel
// at the same time.
func TestReceiptsOfADenseRangeGoAsSeveralRequests(t *testing.T) {
	t.Parallel()
	var ls []types.Log
	for b := uint64(10); b <= 14; b++ {
		for i := range 400 {
			l := burnLog(b, byte(i/100+1), uint(i), big.NewInt(int64(i+1)), 1)
			l.TxHash[30] = byte(b)
			ls = append(ls, l)
		}
	}
	n := &receiptNode{logs: ls, receipts: receiptsOf(ls...)}
	c, _ := n.start(t, chain.Options{VerifyReceipts: true})
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 14)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Burns) != 2000 {
		t.Fatalf("%d burns, want 2000", len(r.Burns))
	}
	var sizes []int
	for _, m := range n.requestMethods()[1:] {
		sizes = append(sizes, strings.Count(m, "eth_getBlockReceipts"))
	}
	slices.Sort(sizes)
	if want := []int{1, 2, 2}; !slices.Equal(sizes, want) {
		t.Fatalf("receipts batches of %v blocks, want %v (400 logs a block, a thousand a batch)", sizes, want)
	}
}

// TestTransactionReceiptsShrinkToTheReplyCap: a block whose receipts are
// over the reply cap is read transaction by transaction, starting with half
// its transactions a batch (all of them together would be the block's
// receipts again, over the cap for certain), and a batch of transaction
// receipts over the cap is halved until it fits (a block of thousands of
// burns: a hundred receipts of a hundred burns each is about 12 MB), the
// size that fit kept for the rest of the read, and every read starting
// again from half the block (a size learned from one block's receipts would
// otherwise slow every later read); every burn is recorded. A single
// receipt over the cap fails the range and says which.
func TestTransactionReceiptsShrinkToTheReplyCap(t *testing.T) {
	t.Parallel()
	n := &receiptNode{receipts: map[uint64][]rcpt{}}
	for i := range 40 {
		l := burnLog(12, byte(i+1), uint(2*i), big.NewInt(int64(i+1)), 1)
		n.logs = append(n.logs, l)
		pad := types.Log{Address: otherContract, Topics: []common.Hash{{1}}, Data: make([]byte, 2048),
			BlockNumber: 12, BlockHash: hashOf(12), TxHash: l.TxHash, Index: uint(2*i + 1)}
		n.receipts[12] = append(n.receipts[12], rcpt{TxHash: l.TxHash, BlockHash: hashOf(12), Status: 1, Logs: []types.Log{l, pad}})
	}
	// About 5 KB of receipt a transaction: the block's 40 (200 KB) and
	// batches of 40 or 20 are over 64 KB, 10 are not.
	c, _ := n.start(t, chain.Options{VerifyReceipts: true, MaxResponseBytes: 64 << 10})
	txBatches := func(from int) []int {
		var sizes []int
		for _, m := range n.requestMethods()[from:] {
			if strings.HasPrefix(m, "eth_getTransactionReceipt") {
				sizes = append(sizes, strings.Count(m, "+")+1)
			}
		}
		return sizes
	}
	for round, want := range [][]int{{20, 10, 10, 10, 10}, {20, 10, 10, 10, 10}} {
		before := len(n.requestMethods())
		r, err := c.BurnRange(context.Background(), []common.Address{contract}, 12, 12)
		if err != nil || len(r.Burns) != 40 {
			t.Fatalf("round %d: %d burns, %v; want 40", round, len(r.Burns), err)
		}
		for i, b := range r.Burns {
			if b.Amount.Int64() != int64(i+1) || b.LogIndex != uint(2*i) {
				t.Fatalf("round %d: burn %d is %s/%d, want amount %d at log %d", round, i, b.Amount, b.LogIndex, i+1, 2*i)
			}
		}
		if got := txBatches(before); !slices.Equal(got, want) {
			t.Fatalf("round %d: transaction receipt batches of %v, want %v", round, got, want)
		}
	}
	// One receipt of 80 KB: nothing fits.
	n.mu.Lock()
	n.receipts[12][7].Logs[1].Data = make([]byte, 80<<10)
	n.mu.Unlock()
	_, err := c.BurnRange(context.Background(), []common.Address{contract}, 12, 12)
	if !errors.Is(err, chain.ErrResponseTooLarge) || !strings.Contains(err.Error(), n.logs[7].TxHash.Hex()) {
		t.Fatalf("a receipt over the cap: %v, want ErrResponseTooLarge naming tx %s", err, n.logs[7].TxHash.Hex())
	}
}
