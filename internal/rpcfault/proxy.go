// Package rpcfault is a JSON-RPC proxy for tests that sits between a client
// and a real node and injects the faults real providers and nodes show:
// range limits with each provider's own error text, 429s with Retry-After,
// 500s, hangs, a lagging view of the chain (or a head standing still while
// finality catches up with it), logs left out, foreign or
// malformed logs, corrupted block hashes, forged burns, replies hiding every
// log, history pruned below a block (EIP-4444), and replies of a hostile
// node (huge error data, headers and error bodies).
package rpcfault

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// Style is a provider whose range-limit reply the proxy imitates.
type Style string

// The range-limit styles, with their providers' real texts and codes.
const (
	StyleGeth      Style = "geth"      // -32602 exceed maximum block range N
	StyleInfura    Style = "infura"    // -32005 query returned more than 10000 results. Try with this block range [..]
	StyleAlchemy   Style = "alchemy"   // -32602 Log response size exceeded ... should work: [..]
	StyleQuickNode Style = "quicknode" // HTTP 413, -32614 eth_getLogs is limited to a N range
	StyleTooLarge  Style = "toolarge"  // -32000 block range too large
	StyleExceeds   Style = "exceeds"   // -32602 range A exceeds limit of N (Infura)
	StyleReth      Style = "reth"      // -32602 query exceeds max results 20000, retry with the range A-B
)

// Styles lists every style.
var Styles = []Style{StyleGeth, StyleInfura, StyleAlchemy, StyleQuickNode, StyleTooLarge, StyleExceeds, StyleReth}

// Faults is what the proxy does to traffic. Counters (Throttle, ServerErrors,
// Hang, ForeignLogs, MalformedLogs, CorruptHashes, ForgeBurns, HideAllLogs)
// count down as they fire. Within a JSON-RPC batch each request meets the
// faults on its own, as if sent alone; the HTTP-level ones (Throttle,
// Unauthorized, ServerErrors, Hang) answer the whole batch.
type Faults struct {
	// RangeLimit refuses eth_getLogs over more than this many blocks, in
	// RangeStyle's words; 0 disables.
	RangeLimit uint64
	RangeStyle Style
	// Throttle answers the next N requests with HTTP 429 and RetryAfter.
	Throttle   int
	RetryAfter time.Duration
	// ServerErrors answers the next N requests with HTTP 500.
	ServerErrors int
	// Hang holds the next N requests until the client gives up.
	Hang int
	// Delay holds every request carrying eth_getLogs this long: a slow node.
	Delay time.Duration
	// Latency holds every HTTP request this long, whatever it carries: a
	// provider a network round trip away.
	Latency time.Duration
	// DelayTarget holds every request for a block by tag ("finalized",
	// "safe", "latest") or eth_blockNumber this long.
	DelayTarget time.Duration
	// Unauthorized answers the next N requests with HTTP 401, as a provider
	// does for a revoked API key.
	Unauthorized int
	// RejectTags answers every block-tag request ("finalized", "safe") as a
	// node that does not know the tag (-32602).
	RejectTags bool
	// LagAt, when set, freezes the node's view at that block: tags resolve
	// no higher, later blocks are null, their logs are missing. It is also
	// a head standing still there (a chain that seals only when it has a
	// transaction): eth_blockNumber and latest are held at it while the
	// node's finalized block passes through as it is up to it, and
	// resolves to it once the node finalized past it.
	LagAt *uint64
	// HideLogsAbove, when set, leaves out of eth_getLogs every log of a
	// block above it, while headers stay honest: a node that lies.
	HideLogsAbove *uint64
	// ForeignLogs adds a log from another contract to the next N
	// eth_getLogs replies that carry logs.
	ForeignLogs int
	// MalformedLogs adds a log of the burn contract and event that does not
	// decode to the next N eth_getLogs replies that carry logs.
	MalformedLogs int
	// CorruptHashes flips the block hash of every log in the next N
	// eth_getLogs replies that carry logs.
	CorruptHashes int
	// ForgeBurns adds to each of the next N eth_getLogs replies that carry
	// a well-formed LogBurnWithDigest log one more, cloned from the first
	// such log: same address, topic0, digest topic, block number and
	// (canonical) block hash, transaction index and timestamp, but a new
	// random transaction hash, another payer and another amount, at a log
	// index no other log of that block in the reply has (0x7f, or one past
	// the highest). It is placed after the reply's last log of its block,
	// so the reply stays in chain order. No receipt holds it: a node that
	// invents a payment. The forged transaction hashes are in
	// Stats.ForgedTxIDs.
	ForgeBurns int
	// HideAllLogs answers each of the next N eth_getLogs replies that carry
	// logs with [], while headers (and their logsBloom) and receipts stay
	// honest: a node hiding burns behind an empty reply. The logs left out
	// count in Stats.HiddenLogs.
	HideAllLogs int
	// PrunedBelow, when set, answers every eth_getLogs whose fromBlock is
	// below it, and every eth_getBlockReceipts or eth_getTransactionReceipt
	// for a block below it, with the JSON-RPC error go-ethereum, reth,
	// Nethermind and Besu give history they no longer hold (EIP-4444):
	// code 4444, "pruned history unavailable". Those requests are not
	// forwarded (a receipt request by hash is placed by looking its block
	// or transaction up first); headers stay served, as a node with expired
	// history still serves them.
	PrunedBelow *uint64
	// Hostile answers the next N requests as a hostile node would, in turn
	// (HostileKinds of them): a JSON-RPC error whose data is 7 MiB of
	// [{},{},…] (within the reply cap), 9 MiB of short response headers
	// (within net/http's default limit), an HTTP 500 with a 4 MiB body,
	// an eth_getLogs result of 7 MiB of [{},{},…] and one of [0,0,…],
	// receipts whose logs are 7 MiB of [{},{},…] (in a block's receipts,
	// or a transaction's receipt), and a JSON-RPC error whose code is a
	// number of 7 million digits. A result goes to the first call of its
	// method, the batch's other calls answered null, and waits for a
	// request that has one.
	Hostile int
	// CutReplies sends each of the next N replies carrying a receipt
	// (eth_getBlockReceipts, eth_getTransactionReceipt) only in part: its
	// full Content-Length and the first half of its body, then the
	// connection closes, as when a provider or the network drops a large
	// reply midway.
	CutReplies int
}

// Stats counts what the proxy did.
type Stats struct {
	Requests int // HTTP requests
	// ResponseBytes counts the bytes of the HTTP bodies sent back to the
	// client, as a provider counts what it serves (uncompressed).
	ResponseBytes int64
	// Calls counts the JSON-RPC calls by method (a batch's one each).
	Calls          map[string]int
	GetLogs        int // eth_getLogs calls seen
	RangeRefused   int
	Throttled      int
	ServerErrors   int
	Hung           int
	Unauthorized   int
	TagsRejected   int
	CutReplies     int // replies sent in part (CutReplies)
	Delayed        int // requests held by Delay or DelayTarget
	LaggedReplies  int
	HiddenLogs     int
	ForeignLogs    int
	MalformedLogs  int
	CorruptedLogs  int
	ForgedLogs     int         // burns invented for ForgeBurns
	PrunedReplies  int         // requests answered 4444 for PrunedBelow
	Hostile        int         // requests answered for Hostile
	MalformedTxIDs []string    // tx hashes of the malformed logs injected
	ForgedTxIDs    []string    // tx hashes of the forged burns injected
	RefusedRanges  [][2]uint64 // eth_getLogs ranges refused for RangeLimit
	// ServedRanges are the eth_getLogs ranges the node answered without
	// error, in order, before any fault bent the reply.
	ServedRanges [][2]uint64
}

// Proxy forwards JSON-RPC to a node, injecting Faults.
type Proxy struct {
	URL      string
	upstream string
	client   *http.Client
	srv      *http.Server

	mu     sync.Mutex
	faults Faults
	stats  Stats
}

// Start serves a proxy for upstream on a free local port.
func Start(upstream string) (*Proxy, error) {
	return StartAt("127.0.0.1:0", upstream)
}

// StartAt serves a proxy for upstream on addr.
func StartAt(addr, upstream string) (*Proxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + l.Addr().String(), upstream: upstream, client: &http.Client{Timeout: time.Minute}}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// Set changes the faults.
func (p *Proxy) Set(f func(*Faults)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.faults)
}

// delayFor is how long to hold a request made of reqs.
func (f Faults) delayFor(reqs []request) time.Duration {
	d := f.Latency
	for _, req := range reqs {
		switch req.Method {
		case "eth_getLogs":
			d = max(d, f.Delay)
		case "eth_blockNumber":
			d = max(d, f.DelayTarget)
		case "eth_getBlockByNumber":
			var tag string
			if len(req.Params) > 0 && json.Unmarshal(req.Params[0], &tag) == nil && !isHex(tag) {
				d = max(d, f.DelayTarget)
			}
		}
	}
	return d
}

func (p *Proxy) currentFaults() Faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults
}

// take uses up one firing of a counted fault (a field of p.faults): it
// reports whether any was left.
func (p *Proxy) take(n *int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.MalformedTxIDs = append([]string(nil), p.stats.MalformedTxIDs...)
	s.RefusedRanges = append([][2]uint64(nil), p.stats.RefusedRanges...)
	s.ForgedTxIDs = append([]string(nil), p.stats.ForgedTxIDs...)
	s.ServedRanges = append([][2]uint64(nil), p.stats.ServedRanges...)
	s.Calls = maps.Clone(p.stats.Calls)
	return s
}

type request struct {
	JSONRPC string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// HostileKinds is how many kinds of reply Faults.Hostile answers in turn.
const HostileKinds = 7

// answerHostile answers the request body with hostile reply kind (Faults.Hostile).
func answerHostile(w http.ResponseWriter, kind int, body []byte) {
	tiny := strings.Repeat("{},", 7<<20/3) + "{}"
	switch kind {
	case 0:
		writeHostile(w, body, hostileMethods[kind], `"error":{"code":-32000,"message":"hostile node","data":[`+tiny+`]}`)
	case 3:
		writeHostile(w, body, hostileMethods[kind], `"result":[`+tiny+`]`)
	case 4:
		writeHostile(w, body, hostileMethods[kind], `"result":[`+strings.Repeat("0,", 7<<20/2)+`0]`)
	case 5:
		if method, _ := firstOf(body, hostileMethods[kind]); method == "eth_getTransactionReceipt" {
			writeHostile(w, body, hostileMethods[kind], `"result":{"logs":[`+tiny+`]}`)
			return
		}
		writeHostile(w, body, hostileMethods[kind], `"result":[{"logs":[`+tiny+`]}]`)
	case 6:
		writeHostile(w, body, hostileMethods[kind], `"error":{"code":1`+strings.Repeat("0", 7<<20)+`,"message":"hostile node"}`)
	case 1:
		w.Header()["X-Hostile"] = slices.Repeat([]string{"1"}, 9<<20/len("X-Hostile: 1\r\n"))
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, strings.Repeat("x", 4<<20))
	}
}

// hostileMethods are, by kind, the methods a hostile reply answers: none
// for any request.
var hostileMethods = map[int][]string{3: {"eth_getLogs"}, 4: {"eth_getLogs"}, 5: {"eth_getBlockReceipts", "eth_getTransactionReceipt"}}

// hostileFits says whether hostile reply kind can answer the request body.
func hostileFits(kind int, body []byte) bool {
	_, ok := firstOf(body, hostileMethods[kind])
	return ok
}

// calls are the calls of the request body, and whether it is a batch.
func calls(body []byte) ([]request, bool) {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		var reqs []request
		_ = json.Unmarshal(body, &reqs)
		return reqs, true
	}
	var one request
	_ = json.Unmarshal(body, &one)
	return []request{one}, false
}

// firstOf is the method of the request's first call of one of methods (the
// first call if methods is empty), and whether there is one.
func firstOf(body []byte, methods []string) (string, bool) {
	reqs, _ := calls(body)
	for _, r := range reqs {
		if len(methods) == 0 || slices.Contains(methods, r.Method) {
			return r.Method, true
		}
	}
	return "", false
}

// writeHostile answers the request body: its first call of one of methods
// (its first, if none are named) with member, its other calls with null
// results.
func writeHostile(w http.ResponseWriter, body []byte, methods []string, member string) {
	reqs, batch := calls(body)
	var b strings.Builder
	if batch {
		b.WriteString("[")
	}
	done := false
	for i, r := range reqs {
		if i > 0 {
			b.WriteString(",")
		}
		id := "null"
		if r.ID != nil {
			id = string(r.ID)
		}
		if !done && (len(methods) == 0 || slices.Contains(methods, r.Method)) {
			done = true
			b.WriteString(`{"jsonrpc":"2.0","id":` + id + `,` + member + `}`)
			continue
		}
		b.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"result":null}`)
	}
	if batch {
		b.WriteString("]")
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, b.String())
}

// httpFault is a fault that answers the whole HTTP request.
type httpFault struct {
	status int
	header map[string]string
	body   []byte
}

func (p *Proxy) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := &countingWriter{ResponseWriter: rw}
	defer func() { p.count(func(s *Stats) { s.ResponseBytes += w.n }) }()
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.stats.Requests++
	var (
		hang    bool
		fault   *httpFault
		hostile = -1 // which of Hostile's replies
	)
	switch {
	case p.faults.Hostile > 0 && hostileFits(p.stats.Hostile%HostileKinds, body):
		p.faults.Hostile--
		hostile = p.stats.Hostile % HostileKinds
		p.stats.Hostile++
	case p.faults.Hang > 0:
		p.faults.Hang--
		p.stats.Hung++
		hang = true
	case p.faults.Throttle > 0:
		p.faults.Throttle--
		p.stats.Throttled++
		h := map[string]string{}
		if p.faults.RetryAfter > 0 {
			h["Retry-After"] = strconv.FormatFloat(p.faults.RetryAfter.Seconds(), 'f', -1, 64)
		}
		fault = &httpFault{http.StatusTooManyRequests, h, []byte(`{"code":429,"message":"Too Many Requests"}`)}
	case p.faults.Unauthorized > 0:
		p.faults.Unauthorized--
		p.stats.Unauthorized++
		fault = &httpFault{http.StatusUnauthorized, nil, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Must be authenticated!"}}`)}
	case p.faults.ServerErrors > 0:
		p.faults.ServerErrors--
		p.stats.ServerErrors++
		fault = &httpFault{http.StatusInternalServerError, nil, []byte("internal server error")}
	}
	p.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if hostile >= 0 {
		answerHostile(w, hostile, body)
		return
	}
	if fault != nil {
		for k, v := range fault.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(fault.status)
		_, _ = w.Write(fault.body)
		return
	}

	batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	var reqs []request
	if batch {
		err = json.Unmarshal(body, &reqs)
	} else {
		var one request
		err = json.Unmarshal(body, &one)
		reqs = []request{one}
	}
	if err != nil {
		http.Error(w, "bad JSON-RPC request", http.StatusBadRequest)
		return
	}
	if d := p.currentFaults().delayFor(reqs); d > 0 {
		p.count(func(s *Stats) { s.Delayed++ })
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	resps, status, err := p.handle(r.Context(), reqs)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	var reply any = resps
	if !batch {
		reply = resps[0]
	}
	out, err := json.Marshal(reply)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if carriesReceipts(reqs) && p.take(&p.faults.CutReplies) {
		p.count(func(s *Stats) { s.CutReplies++ })
		cutReply(w, rw, status, out)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(out, '\n'))
}

// carriesReceipts says reqs ask for a receipt.
func carriesReceipts(reqs []request) bool {
	return slices.ContainsFunc(reqs, func(r request) bool {
		return r.Method == "eth_getBlockReceipts" || r.Method == "eth_getTransactionReceipt"
	})
}

// cutReply sends body's full length and its first half, then closes the
// connection under rw.
func cutReply(w io.Writer, rw http.ResponseWriter, status int, body []byte) {
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	_, _ = w.Write(body[:len(body)/2])
	if f, ok := rw.(http.Flusher); ok {
		f.Flush()
	}
	if conn, _, err := http.NewResponseController(rw).Hijack(); err == nil {
		_ = conn.Close()
	}
}

// countingWriter counts the bytes of a response body.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// handle answers reqs: some synthesised here, the rest forwarded in one
// batch and then bent by the faults.
func (p *Proxy) handle(ctx context.Context, reqs []request) ([]response, int, error) {
	f := p.currentFaults()
	out := make([]response, len(reqs))
	var forward []int
	status := http.StatusOK
	var receiptBlock map[int]uint64
	if f.PrunedBelow != nil {
		var err error
		if receiptBlock, err = p.receiptBlocks(ctx, reqs); err != nil {
			return nil, 0, err
		}
	}
	for i, req := range reqs {
		p.count(func(s *Stats) {
			if s.Calls == nil {
				s.Calls = map[string]int{}
			}
			s.Calls[req.Method]++
		})
		if n, ok := receiptBlock[i]; ok && n < *f.PrunedBelow {
			p.count(func(s *Stats) { s.PrunedReplies++ })
			out[i] = prunedReply(req)
			continue
		}
		if f.RejectTags && req.Method == "eth_getBlockByNumber" && len(req.Params) > 0 {
			var tag string
			if json.Unmarshal(req.Params[0], &tag) == nil && (tag == "finalized" || tag == "safe") {
				p.count(func(s *Stats) { s.TagsRejected++ })
				out[i] = response{JSONRPC: "2.0", ID: req.ID, Error: &rpcError{Code: -32602, Message: "invalid argument 0: hex string without 0x prefix"}}
				continue
			}
		}
		if req.Method == "eth_getLogs" {
			p.count(func(s *Stats) { s.GetLogs++ })
			if from, ok := fromBlock(req); ok && f.PrunedBelow != nil && from < *f.PrunedBelow {
				p.count(func(s *Stats) { s.PrunedReplies++ })
				out[i] = prunedReply(req)
				continue
			}
			if from, to, ok := filterRange(req); ok && f.RangeLimit > 0 && to-from+1 > f.RangeLimit {
				p.count(func(s *Stats) {
					s.RangeRefused++
					s.RefusedRanges = append(s.RefusedRanges, [2]uint64{from, to})
				})
				out[i] = response{JSONRPC: "2.0", ID: req.ID, Error: rangeError(f.RangeStyle, from, to, f.RangeLimit)}
				if f.RangeStyle == StyleQuickNode {
					status = http.StatusRequestEntityTooLarge
				}
				continue
			}
		}
		forward = append(forward, i)
	}
	if len(forward) > 0 {
		fwd := make([]request, len(forward))
		for j, i := range forward {
			fwd[j] = reqs[i]
		}
		got, err := p.forward(ctx, fwd)
		if err != nil {
			return nil, 0, err
		}
		for j, i := range forward {
			out[i] = got[j]
		}
	}
	for i, req := range reqs {
		if out[i].Error != nil || out[i].Result == nil {
			continue
		}
		if err := p.bend(ctx, f, req, &out[i]); err != nil {
			return nil, 0, err
		}
	}
	return out, status, nil
}

// bend applies the reply-level faults to one forwarded reply.
func (p *Proxy) bend(ctx context.Context, f Faults, req request, resp *response) error {
	switch req.Method {
	case "eth_blockNumber":
		if f.LagAt == nil {
			return nil
		}
		var head hexutil.Uint64
		if json.Unmarshal(resp.Result, &head) == nil && uint64(head) > *f.LagAt {
			resp.Result, _ = json.Marshal(hexutil.Uint64(*f.LagAt))
			p.count(func(s *Stats) { s.LaggedReplies++ })
		}
	case "eth_getBlockByNumber":
		if f.LagAt == nil || string(resp.Result) == "null" {
			return nil
		}
		var blk struct {
			Number hexutil.Uint64 `json:"number"`
		}
		if json.Unmarshal(resp.Result, &blk) != nil || uint64(blk.Number) <= *f.LagAt {
			return nil
		}
		p.count(func(s *Stats) { s.LaggedReplies++ })
		var tag string
		if json.Unmarshal(req.Params[0], &tag) == nil && !isHex(tag) {
			// A tag resolves to the lagging view's block.
			got, err := p.forward(ctx, []request{{JSONRPC: "2.0", ID: req.ID, Method: "eth_getBlockByNumber",
				Params: []json.RawMessage{mustJSON(hexutil.Uint64(*f.LagAt)), json.RawMessage("false")}}})
			if err != nil {
				return err
			}
			*resp = got[0]
			return nil
		}
		resp.Result = json.RawMessage("null")
	case "eth_getLogs":
		if from, to, ok := filterRange(req); ok {
			p.count(func(s *Stats) { s.ServedRanges = append(s.ServedRanges, [2]uint64{from, to}) })
		}
		return p.bendLogs(f, resp)
	}
	return nil
}

func (p *Proxy) bendLogs(f Faults, resp *response) error {
	var logs []map[string]any
	if err := json.Unmarshal(resp.Result, &logs); err != nil {
		return nil
	}
	changed := false
	limit := f.HideLogsAbove
	if f.LagAt != nil && (limit == nil || *f.LagAt < *limit) {
		limit = f.LagAt
	}
	if limit != nil {
		kept := logs[:0]
		for _, l := range logs {
			if n, ok := hexField(l, "blockNumber"); ok && n > *limit {
				p.count(func(s *Stats) { s.HiddenLogs++ })
				changed = true
				continue
			}
			kept = append(kept, l)
		}
		logs = kept
	}
	if len(logs) > 0 {
		if p.take(&p.faults.HideAllLogs) {
			n := len(logs)
			p.count(func(s *Stats) { s.HiddenLogs += n })
			logs = []map[string]any{}
			changed = true
		}
	}
	if src := forgeSource(logs); src >= 0 {
		if p.take(&p.faults.ForgeBurns) {
			var tx string
			logs, tx = forgeBurn(logs, src)
			p.count(func(s *Stats) {
				s.ForgedLogs++
				s.ForgedTxIDs = append(s.ForgedTxIDs, tx)
			})
			changed = true
		}
	}
	if len(logs) > 0 {
		foreign, malformed, corrupt := p.take(&p.faults.ForeignLogs), p.take(&p.faults.MalformedLogs), p.take(&p.faults.CorruptHashes)
		if corrupt {
			for _, l := range logs {
				if h, ok := l["blockHash"].(string); ok && len(h) > 3 {
					l["blockHash"] = h[:2] + flipHex(h[2]) + h[3:]
				}
			}
			p.count(func(s *Stats) { s.CorruptedLogs += len(logs) })
			changed = true
		}
		if foreign {
			l := clone(logs[0])
			l["address"] = "0x000000000000000000000000000000000000f00d"
			l["transactionHash"] = randomHash()
			logs = append(logs, l)
			p.count(func(s *Stats) { s.ForeignLogs++ })
			changed = true
		}
		if malformed {
			l := clone(logs[0])
			tx := randomHash()
			l["transactionHash"] = tx
			l["logIndex"] = "0x0"
			l["data"] = "0x010203"
			logs = append(logs, l)
			p.count(func(s *Stats) {
				s.MalformedLogs++
				s.MalformedTxIDs = append(s.MalformedTxIDs, tx)
			})
			changed = true
		}
	}
	if changed {
		b, err := json.Marshal(logs)
		if err != nil {
			return err
		}
		resp.Result = b
	}
	return nil
}

// forgeSource is the index of the first log of logs shaped as a
// LogBurnWithDigest (three topics, two data words), or -1.
func forgeSource(logs []map[string]any) int {
	for i, l := range logs {
		topics, _ := l["topics"].([]any)
		data, _ := l["data"].(string)
		if len(topics) == 3 && len(data) == 2+128 {
			if _, ok := hexField(l, "blockNumber"); ok {
				return i
			}
		}
	}
	return -1
}

// forgeBurn returns logs with a burn cloned from logs[src] added after the
// last log of its block, and the forged transaction hash.
func forgeBurn(logs []map[string]any, src int) ([]map[string]any, string) {
	orig := logs[src]
	block, _ := hexField(orig, "blockNumber")
	l := clone(orig)
	tx := randomHash()
	l["transactionHash"] = tx
	topics := append([]any(nil), orig["topics"].([]any)...)
	payer := make([]byte, 32)
	_, _ = rand.Read(payer[12:])
	if t1, _ := topics[1].(string); t1 == hexutil.Encode(payer) {
		payer[31] ^= 1
	}
	topics[1] = hexutil.Encode(payer)
	l["topics"] = topics
	data, _ := hexutil.Decode(orig["data"].(string))
	amount := new(big.Int).SetBytes(data[:32])
	extra := make([]byte, 4)
	_, _ = rand.Read(extra)
	forged := new(big.Int).Add(amount, new(big.Int).SetUint64(1+uint64(extra[0])<<24|uint64(extra[1])<<16|uint64(extra[2])<<8|uint64(extra[3])))
	if forged.BitLen() > 256 {
		forged.Sub(amount, big.NewInt(1))
	}
	word := make([]byte, 32)
	forged.FillBytes(word)
	l["data"] = hexutil.Encode(append(word, data[32:]...))
	idx, last := uint64(0x7f), src
	for i, x := range logs {
		if n, ok := hexField(x, "blockNumber"); !ok || n != block {
			continue
		}
		last = max(last, i)
		if li, ok := hexField(x, "logIndex"); ok && li >= idx {
			idx = li + 1
		}
	}
	l["logIndex"] = hexutil.EncodeUint64(idx)
	out := make([]map[string]any, 0, len(logs)+1)
	out = append(out, logs[:last+1]...)
	out = append(out, l)
	out = append(out, logs[last+1:]...)
	return out, tx
}

// prunedReply is a node's answer for history it no longer holds (EIP-4444).
func prunedReply(req request) response {
	return response{JSONRPC: "2.0", ID: req.ID, Error: &rpcError{Code: 4444, Message: "pruned history unavailable"}}
}

// receiptBlocks places the receipt requests among reqs (eth_getBlockReceipts,
// eth_getTransactionReceipt) in their blocks: by the block number they name,
// or, for a block or transaction hash, by looking it up upstream in one
// batch. Requests it cannot place (a tag, an unknown hash, a pending
// transaction) are left out.
func (p *Proxy) receiptBlocks(ctx context.Context, reqs []request) (map[int]uint64, error) {
	out := map[int]uint64{}
	var (
		lookups []request
		owners  []int
	)
	lookup := func(i int, method string, hash json.RawMessage) {
		lookups = append(lookups, request{JSONRPC: "2.0", ID: mustJSON(len(lookups) + 1), Method: method,
			Params: []json.RawMessage{hash}})
		owners = append(owners, i)
	}
	for i, req := range reqs {
		if len(req.Params) == 0 {
			continue
		}
		switch req.Method {
		case "eth_getTransactionReceipt":
			lookup(i, "eth_getTransactionByHash", req.Params[0])
		case "eth_getBlockReceipts":
			var s string
			if json.Unmarshal(req.Params[0], &s) != nil {
				// EIP-1898: {"blockHash": ...} or {"blockNumber": ...}.
				var obj struct {
					Hash   *string `json:"blockHash"`
					Number *string `json:"blockNumber"`
				}
				if json.Unmarshal(req.Params[0], &obj) != nil {
					continue
				}
				switch {
				case obj.Hash != nil:
					s = *obj.Hash
				case obj.Number != nil:
					s = *obj.Number
				}
			}
			switch {
			case len(s) == 66 && isHex(s):
				lookups = append(lookups, request{JSONRPC: "2.0", ID: mustJSON(len(lookups) + 1), Method: "eth_getBlockByHash",
					Params: []json.RawMessage{mustJSON(s), json.RawMessage("false")}})
				owners = append(owners, i)
			case isHex(s):
				if n, err := hexutil.DecodeUint64(s); err == nil {
					out[i] = n
				}
			}
		}
	}
	if len(lookups) == 0 {
		return out, nil
	}
	got, err := p.forward(ctx, lookups)
	if err != nil {
		return nil, err
	}
	for j, g := range got {
		if g.Error != nil || g.Result == nil {
			continue
		}
		var obj map[string]any
		if json.Unmarshal(g.Result, &obj) != nil || obj == nil {
			continue
		}
		key := "number"
		if lookups[j].Method == "eth_getTransactionByHash" {
			key = "blockNumber"
		}
		if n, ok := hexField(obj, key); ok {
			out[owners[j]] = n
		}
	}
	return out, nil
}

func (p *Proxy) forward(ctx context.Context, reqs []request) ([]response, error) {
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.upstream, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var got []response
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return nil, fmt.Errorf("upstream reply: %w", err)
	}
	byID := make(map[string]response, len(got))
	for _, g := range got {
		byID[string(g.ID)] = g
	}
	out := make([]response, len(reqs))
	for i, r := range reqs {
		g, ok := byID[string(r.ID)]
		if !ok {
			return nil, fmt.Errorf("upstream left out request %s", r.ID)
		}
		out[i] = g
	}
	return out, nil
}

func (p *Proxy) count(f func(*Stats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

// rangeError is a provider's reply to an eth_getLogs over [from, to] when it
// allows limit blocks.
func rangeError(style Style, from, to, limit uint64) *rpcError {
	sugTo := from + limit - 1
	switch style {
	case StyleInfura:
		return &rpcError{Code: -32005,
			Message: fmt.Sprintf("query returned more than 10000 results. Try with this block range [%#x, %#x].", from, sugTo),
			Data:    map[string]any{"from": fmt.Sprintf("%#x", from), "limit": 10000, "to": fmt.Sprintf("%#x", sugTo)}}
	case StyleAlchemy:
		return &rpcError{Code: -32602, Message: fmt.Sprintf("Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [%#x, %#x]", from, sugTo)}
	case StyleQuickNode:
		return &rpcError{Code: -32614, Message: fmt.Sprintf("eth_getLogs is limited to a %d range", limit)}
	case StyleTooLarge:
		return &rpcError{Code: -32000, Message: "block range too large"}
	case StyleExceeds:
		return &rpcError{Code: -32602, Message: fmt.Sprintf("range %d exceeds limit of %d", to-from+1, limit)}
	case StyleReth:
		return &rpcError{Code: -32602, Message: fmt.Sprintf("query exceeds max results 20000, retry with the range %d-%d", from, sugTo)}
	default: // StyleGeth and unnamed styles
		return &rpcError{Code: -32602, Message: fmt.Sprintf("exceed maximum block range %d", limit-1)}
	}
}

func filterRange(req request) (from, to uint64, ok bool) {
	if len(req.Params) == 0 {
		return 0, 0, false
	}
	var f struct {
		From string `json:"fromBlock"`
		To   string `json:"toBlock"`
	}
	if json.Unmarshal(req.Params[0], &f) != nil {
		return 0, 0, false
	}
	a, err1 := hexutil.DecodeUint64(f.From)
	b, err2 := hexutil.DecodeUint64(f.To)
	return a, b, err1 == nil && err2 == nil && a <= b
}

// fromBlock is the fromBlock of an eth_getLogs filter given as a number.
func fromBlock(req request) (uint64, bool) {
	if len(req.Params) == 0 {
		return 0, false
	}
	var f struct {
		From string `json:"fromBlock"`
	}
	if json.Unmarshal(req.Params[0], &f) != nil {
		return 0, false
	}
	n, err := hexutil.DecodeUint64(f.From)
	return n, err == nil
}

func hexField(m map[string]any, key string) (uint64, bool) {
	s, ok := m[key].(string)
	if !ok {
		return 0, false
	}
	n, err := hexutil.DecodeUint64(s)
	return n, err == nil
}

func isHex(s string) bool { return len(s) > 2 && s[:2] == "0x" }

func flipHex(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func randomHash() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hexutil.Encode(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
