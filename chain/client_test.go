package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/burnpoller/burnpoller/chain"
)

// fakeNode is a JSON-RPC server at the RPC boundary: it answers single and
// batch requests from a handler keyed by method.
type fakeNode struct {
	mu     sync.Mutex
	calls  []string
	handle func(method string, params []json.RawMessage) (any, error)
}

type rpcReq struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f.reply(raw))
}

// reply answers one JSON-RPC message, a single request or a batch.
func (f *fakeNode) reply(raw json.RawMessage) any {
	answer := func(req rpcReq) map[string]any {
		f.mu.Lock()
		f.calls = append(f.calls, req.Method)
		f.mu.Unlock()
		res, err := f.handle(req.Method, req.Params)
		if err != nil {
			code := -32000
			var coded *jsonRPCError
			if errors.As(err, &coded) {
				code = coded.code
			}
			return map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": code, "message": err.Error()}}
		}
		return map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": res}
	}
	if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		var reqs []rpcReq
		_ = json.Unmarshal(raw, &reqs)
		out := make([]map[string]any, len(reqs))
		for i, req := range reqs {
			out[i] = answer(req)
		}
		return out
	}
	var req rpcReq
	_ = json.Unmarshal(raw, &req)
	return answer(req)
}

func startFake(t *testing.T, handle func(string, []json.RawMessage) (any, error)) (*chain.Client, *fakeNode) {
	t.Helper()
	f := &fakeNode{handle: handle}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := chain.Dial(context.Background(), srv.URL, chain.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, f
}

func header(n uint64, hash, parent common.Hash) map[string]any {
	return map[string]any{
		"number":     hexutil.Uint64(n),
		"hash":       hash,
		"parentHash": parent,
		"timestamp":  hexutil.Uint64(1_700_000_000 + n),
	}
}

func hashOf(n uint64) common.Hash { return common.BigToHash(new(big.Int).SetUint64(n + 1000)) }

// chainOf answers like a consistent node whose block n has hash hashOf(n)
// and whose logs are logs.
func chainOf(logs []types.Log) func(string, []json.RawMessage) (any, error) {
	return func(method string, params []json.RawMessage) (any, error) {
		switch method {
		case "eth_getLogs":
			return logs, nil
		case "eth_getBlockByNumber":
			var n hexutil.Uint64
			if err := json.Unmarshal(params[0], &n); err != nil {
				return nil, err
			}
			return header(uint64(n), hashOf(uint64(n)), hashOf(uint64(n)-1)), nil
		}
		return nil, fmt.Errorf("unexpected %s", method)
	}
}

func TestBurnRangeFetchesLogsAndHeadersInOneBatch(t *testing.T) {
	t.Parallel()
	logs := []types.Log{burnLog(10, 1, 0, big.NewInt(5), 1), burnLog(12, 2, 0, maxUint256(), 2), burnLog(20, 3, 4, big.NewInt(9), 3)}
	c, f := startFake(t, chainOf(logs))
	r, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Burns) != 3 || r.Burns[1].Amount.Cmp(maxUint256()) != 0 {
		t.Fatalf("burns = %+v", r.Burns)
	}
	if r.From.Number != 10 || r.To.Number != 20 || r.To.Hash != hashOf(20) || r.From.ParentHash != hashOf(9) {
		t.Fatalf("headers = %+v %+v", r.From, r.To)
	}
	// One batch with the logs and both end headers, then the header of
	// block 12, the one other block holding a log.
	if got := strings.Join(f.calls, ","); got != "eth_getLogs,eth_getBlockByNumber,eth_getBlockByNumber,eth_getBlockByNumber" {
		t.Fatalf("calls = %s", got)
	}
}

func TestBurnRangeRejectsInconsistentReplies(t *testing.T) {
	t.Parallel()
	good := chainOf([]types.Log{burnLog(20, 1, 0, big.NewInt(5), 1)})
	tests := []struct {
		name    string
		handle  func(string, []json.RawMessage) (any, error)
		wantErr error
	}{
		{"log block hash is not the canonical one", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getLogs" {
				l := burnLog(20, 1, 0, big.NewInt(5), 1)
				l.BlockHash = common.HexToHash("0xbad")
				return []types.Log{l}, nil
			}
			return good(m, p)
		}, chain.ErrBadReply},
		{"log in a middle block with a non-canonical hash", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getLogs" {
				l := burnLog(15, 1, 0, big.NewInt(5), 1)
				l.BlockHash = common.HexToHash("0xbad")
				return []types.Log{l}, nil
			}
			return good(m, p)
		}, chain.ErrBadReply},
		{"header of another block", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getBlockByNumber" {
				return header(99, hashOf(99), hashOf(98)), nil
			}
			return good(m, p)
		}, chain.ErrBadReply},
		{"header missing", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getBlockByNumber" {
				return nil, nil
			}
			return good(m, p)
		}, chain.ErrNotFound},
		{"header without hash", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getBlockByNumber" {
				return map[string]any{"number": "0x14", "parentHash": hashOf(19), "timestamp": "0x1"}, nil
			}
			return good(m, p)
		}, chain.ErrBadReply},
		{"foreign log", func(m string, p []json.RawMessage) (any, error) {
			if m == "eth_getLogs" {
				l := burnLog(20, 1, 0, big.NewInt(5), 1)
				l.Address = payer
				return []types.Log{l}, nil
			}
			return good(m, p)
		}, chain.ErrBadReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := startFake(t, tt.handle)
			if _, err := c.BurnRange(context.Background(), []common.Address{contract}, 10, 20); !errors.Is(err, tt.wantErr) {
				t.Fatalf("BurnRange = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		finality      chain.Finality
		confirmations uint64
		handle        func(string, []json.RawMessage) (any, error)
		want          int64
	}{
		{"finalized", chain.FinalityFinalized, 0, func(m string, p []json.RawMessage) (any, error) {
			if string(p[0]) != `"finalized"` {
				return nil, fmt.Errorf("asked for %s", p[0])
			}
			return header(64, hashOf(64), hashOf(63)), nil
		}, 64},
		{"safe", chain.FinalitySafe, 0, func(m string, p []json.RawMessage) (any, error) {
			if string(p[0]) != `"safe"` {
				return nil, fmt.Errorf("asked for %s", p[0])
			}
			return header(70, hashOf(70), hashOf(69)), nil
		}, 70},
		{"no finalized block yet (geth)", chain.FinalityFinalized, 0, func(string, []json.RawMessage) (any, error) {
			return nil, errors.New("finalized block not found")
		}, -1},
		{"latest minus confirmations", chain.FinalityLatest, 12, func(m string, _ []json.RawMessage) (any, error) {
			return hexutil.Uint64(100), nil
		}, 88},
		{"head below confirmations", chain.FinalityLatest, 12, func(m string, _ []json.RawMessage) (any, error) {
			return hexutil.Uint64(5), nil
		}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := startFake(t, tt.handle)
			got, err := c.Target(context.Background(), tt.finality, tt.confirmations)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Target = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestBlockNumbersAboveMaxBlockAreBadReplies: no number above
// chain.MaxBlock leaves chain, so callers keep block numbers in an int64
// without a check of their own.
func TestBlockNumbersAboveMaxBlockAreBadReplies(t *testing.T) {
	t.Parallel()
	reply := func(v any) func(string, []json.RawMessage) (any, error) {
		return func(string, []json.RawMessage) (any, error) { return v, nil }
	}
	ctx := context.Background()
	c, _ := startFake(t, reply(hexutil.Uint64(chain.MaxBlock+1)))
	if got, err := c.BlockNumber(ctx); !errors.Is(err, chain.ErrBadReply) {
		t.Fatalf("BlockNumber = %d, %v; want a bad reply", got, err)
	}
	c, _ = startFake(t, reply(header(chain.MaxBlock+1, hashOf(1), hashOf(0))))
	if got, err := c.HeaderByNumber(ctx, chain.MaxBlock+1); !errors.Is(err, chain.ErrBadReply) {
		t.Fatalf("HeaderByNumber = %+v, %v; want a bad reply", got, err)
	}
	c, _ = startFake(t, reply(hexutil.Uint64(chain.MaxBlock)))
	if got, err := c.BlockNumber(ctx); err != nil || got != chain.MaxBlock {
		t.Fatalf("BlockNumber at MaxBlock = %d, %v", got, err)
	}
	c, _ = startFake(t, reply(header(chain.MaxBlock, hashOf(1), hashOf(0))))
	if got, err := c.HeaderByNumber(ctx, chain.MaxBlock); err != nil || got.Number != chain.MaxBlock {
		t.Fatalf("HeaderByNumber at MaxBlock = %+v, %v", got, err)
	}
}

type recordingObserver struct {
	mu  sync.Mutex
	got []string
}

func (o *recordingObserver) BadReply(_, method string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, method+"=bad reply")
}

func (o *recordingObserver) RPC(_, method, result string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, method+"="+result)
}

func TestObserverSeesEachMethodAndClass(t *testing.T) {
	t.Parallel()
	f := &fakeNode{handle: chainOf(nil)}
	srv := httptest.NewServer(f)
	defer srv.Close()
	obs := &recordingObserver{}
	c, err := chain.Dial(context.Background(), srv.URL, chain.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.BurnRange(context.Background(), []common.Address{contract}, 1, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ChainID(context.Background()); err == nil {
		t.Fatal("eth_chainId unexpectedly answered")
	}
	want := "eth_getLogs=ok,eth_getBlockByNumber=ok,eth_getBlockByNumber=ok,eth_chainId=transient"
	if s := strings.Join(obs.got, ","); s != want {
		t.Fatalf("observed %s, want %s", s, want)
	}
}

// TestLoopbackNodeRepliesUncompressed: a node on this host is asked for
// uncompressed replies (compression costs both sides CPU and saves no
// bandwidth there).
func TestLoopbackNodeRepliesUncompressed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var encodings []string
	f := &fakeNode{handle: func(method string, _ []json.RawMessage) (any, error) { return hexutil.Uint64(1337), nil }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings = append(encodings, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		f.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := chain.Dial(context.Background(), srv.URL, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.ChainID(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(encodings) != 1 || strings.Contains(encodings[0], "gzip") {
		t.Fatalf("Accept-Encoding %q, want no gzip", encodings)
	}
}
