// Package chain talks to EVM nodes over JSON-RPC: chain id, finality
// targets, block headers and burn logs. It validates and decodes what a node
// returns and never trusts a reply it did not check; it classifies failures,
// adapts eth_getLogs ranges to provider limits and fails over between
// endpoints.
package chain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"
)

// Finality selects how the target block is chosen.
type Finality string

// The finality modes. FinalityLatest is the head minus a number of confirmations.
const (
	FinalityFinalized Finality = "finalized"
	FinalitySafe      Finality = "safe"
	FinalityLatest    Finality = "latest"
)

var (
	// ErrBadReply marks a reply that contradicts the request or itself: the
	// node is faulty or inconsistent, and the call may succeed elsewhere or later.
	ErrBadReply = errors.New("inconsistent reply from node")
	// ErrNotFound marks a block the node does not have (a null result).
	ErrNotFound = errors.New("block not found")
	// ErrNoFinalityBlock marks a node that has no finalized or safe block yet.
	ErrNoFinalityBlock = errors.New("node has no block with that finality yet")
)

// Header is the part of a block header burnpoller relies on.
type Header struct {
	Number     uint64
	Hash       common.Hash
	ParentHash common.Hash
	Time       uint64
	// Bloom is the block's logsBloom (zero when the node sent none).
	Bloom types.Bloom
	// Txs are the hashes of the block's transactions, as a block read
	// without them in full lists them; nil when not known (a header known
	// only by a receipt or a log).
	Txs []common.Hash
}

// The results an Observer sees besides the error classes.
const (
	// ResultOK: the node answered.
	ResultOK = "ok"
	// ResultCanceled: the caller gave up on the call (its ctx ended), which
	// says nothing about the node. The request timeout (Options.Timeout)
	// firing is not this but a ClassTransient failure.
	ResultCanceled = "canceled"
)

// Observer receives what the chain layer sees; poller.Metrics is the real one.
type Observer interface {
	// RPC is called once per JSON-RPC method call with its result
	// (ResultOK, ResultCanceled or a Class); calls in one batch share the
	// batch's duration.
	RPC(endpoint, method, result string, took time.Duration)
	// BadReply is called when a reply that arrived fine fails validation.
	BadReply(endpoint, method string)
}

// nopObserver hears nothing: the observer of a client or set given none.
type nopObserver struct{}

// RPC does nothing.
func (nopObserver) RPC(string, string, string, time.Duration) {}

// BadReply does nothing.
func (nopObserver) BadReply(string, string) {}

// Lagging does nothing.
func (nopObserver) Lagging(string, int64) {}

// RangeLimit does nothing.
func (nopObserver) RangeLimit(string, uint64) {}

// Active does nothing.
func (nopObserver) Active(string) {}

// Options tune a Client.
type Options struct {
	// Timeout bounds every request, and the WebSocket dial made on first
	// use; zero means 10 seconds.
	Timeout time.Duration
	// Observer, if set, sees every call.
	Observer Observer
	// HeaderBatch is the most headers asked for in one batch; zero means 200.
	HeaderBatch int
	// MaxResponseBytes caps one reply body; zero means MaxResponseBytes.
	MaxResponseBytes int64
	// VerifyReceipts confirms every log of a range in its transaction's
	// receipt before the range is returned (VERIFY_RECEIPTS).
	VerifyReceipts bool
	// Weights are the provider's price of each method; nil means
	// DefaultWeights.
	Weights Weights
}

// Client is a JSON-RPC client for one node endpoint. It is safe for
// concurrent use.
type Client struct {
	rawURL  string
	display string
	opts    Options

	dialing chan struct{} // a token held while dialling: one dial at a time
	// httpc sends the calls and batches of an HTTP endpoint (httpCall,
	// httpBatch); nil for a WebSocket one.
	httpc  *http.Client
	mu     sync.Mutex
	ws     *wsConn // a WebSocket endpoint's connection: nil until dialled, and once lost
	closed bool
	// noBlockReceipts is set once the node showed it has no usable
	// eth_getBlockReceipts: receipts are then read per transaction.
	noBlockReceipts atomic.Bool
	// receiptBatch is the eth_getBlockReceipts batch size learned from
	// replies over the cap (0: receiptBatchStart).
	receiptBatch atomic.Int32
	// answered is when the node last answered a request without error
	// (unix nanoseconds; 0: never).
	answered atomic.Int64
}

// answeredWithin says the node answered a request without error less than
// d before now.
func (c *Client) answeredWithin(now time.Time, d time.Duration) bool {
	at := c.answered.Load()
	return at != 0 && now.Sub(time.Unix(0, at)) < d
}

// errClosed is the error of a call on a closed Client.
var errClosed = errors.New("client closed")

// Dial prepares a client for rawURL (http, https, ws or wss). No connection
// is made until the first call: an unreachable endpoint does not fail Dial,
// only the calls made through it. A WebSocket endpoint is dialled on first
// use within Options.Timeout, and again by the next call whenever its
// connection is lost. Dial fails on a malformed URL or an unknown scheme.
func Dial(ctx context.Context, rawURL string, opts Options) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.HeaderBatch <= 0 {
		opts.HeaderBatch = 200
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = MaxResponseBytes
	}
	if opts.Weights == nil {
		opts.Weights = DefaultWeights()
	}
	display := RedactURL(rawURL)
	c := &Client{rawURL: rawURL, display: display, opts: opts, dialing: make(chan struct{}, 1)}
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, fmt.Errorf("dialing node %s: %w", display, redactError(err, rawURL, display))
	}
	if u.Scheme == "ws" || u.Scheme == "wss" {
		if u.Host == "" {
			return nil, fmt.Errorf("dialing node %s: no host in the URL", display)
		}
		return c, nil
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("dialing node %s: no known transport for URL scheme %q", display, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("dialing node %s: no host in the URL", display)
	}
	// Over HTTP, a connection is made per request (and kept for reuse):
	// this makes none.
	c.httpc = &http.Client{Transport: retryAfterTransport{base: nodeTransport(u.Hostname()), limit: opts.MaxResponseBytes}}
	return c, nil
}

// idleConnsPerNode is how many idle connections to one endpoint are kept
// for reuse: as many as requests a client has in flight at once (ranges
// ahead, and each range's receipts and headers batches), so that none is
// closed only to be dialled again, with a TLS handshake to a provider.
// net/http keeps two.
const idleConnsPerNode = 16

// maxResponseHeaderBytes caps a node's response headers, which
// MaxResponseBytes (a body's cap) does not cover: net/http's default of
// 10 MiB let one reply of short header lines cost 130 MiB. Providers send
// a few KiB.
const maxResponseHeaderBytes = 64 << 10

// nodeTransport is the HTTP transport to the node at host. Replies of a
// node on this host (loopback) are not compressed: gzip saves no bandwidth
// there and costs both sides CPU they usually share (on geth --dev, a
// quarter of the node's CPU for eth_getLogs and receipts, BENCHMARKS.md);
// a distant provider's replies stay compressed. Response headers are
// capped at maxResponseHeaderBytes.
func nodeTransport(host string) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idleConnsPerNode
	t.DisableCompression = isLoopback(host)
	t.MaxResponseHeaderBytes = maxResponseHeaderBytes
	return t
}

// isLoopback says host names this host: localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialled returns the connection if there is one and it is not lost,
// errClosed once the client is closed, or neither.
func (c *Client) dialled() (*wsConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.ws != nil && c.ws.broken() {
		c.ws.close()
		c.ws = nil
	}
	return c.ws, nil
}

// conn returns the client's connection, dialling it first if it is a
// WebSocket endpoint not dialled yet or whose connection was lost; ctx
// bounds the dial. Over HTTP there is none.
func (c *Client) conn(ctx context.Context) (*wsConn, error) {
	if w, err := c.dialled(); w != nil || err != nil || c.httpc != nil {
		return w, err
	}
	select {
	case c.dialing <- struct{}{}:
		defer func() { <-c.dialing }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Another call may have dialled while this one waited its turn.
	if w, err := c.dialled(); w != nil || err != nil {
		return w, err
	}
	// The same cap on a message as on an HTTP reply.
	w, err := dialWS(ctx, c.rawURL, c.opts.MaxResponseBytes, nil)
	if err != nil {
		return nil, fmt.Errorf("dialing: %w", err)
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.ws = w
	}
	c.mu.Unlock()
	if closed {
		w.close()
		return nil, errClosed
	}
	return w, nil
}

// Close releases the client's connections.
func (c *Client) Close() {
	c.mu.Lock()
	w := c.ws
	c.closed = true
	c.mu.Unlock()
	if w != nil {
		w.close()
	}
	if c.httpc != nil {
		c.httpc.CloseIdleConnections()
	}
}

// String names the endpoint with any credentials redacted.
func (c *Client) String() string { return c.display }

// ChainID returns the node's chain id (eth_chainId).
func (c *Client) ChainID(ctx context.Context) (uint64, error) {
	var id hexutil.Big
	if err := c.call(ctx, &id, "eth_chainId"); err != nil {
		return 0, err
	}
	v := (*big.Int)(&id)
	if !v.IsUint64() {
		return 0, c.badReply("eth_chainId", fmt.Errorf("%w: chain id %s out of range", ErrBadReply, v))
	}
	return v.Uint64(), nil
}

// BlockNumber returns the node's head (eth_blockNumber).
func (c *Client) BlockNumber(ctx context.Context) (uint64, error) {
	var head hexutil.Uint64
	if err := c.call(ctx, &head, "eth_blockNumber"); err != nil {
		return 0, err
	}
	if head > MaxBlock {
		return 0, c.badReply("eth_blockNumber", fmt.Errorf("%w: block number %d out of range", ErrBadReply, uint64(head)))
	}
	return uint64(head), nil
}

// Target returns the highest block this node can prove under finality: its
// finalized or safe block, or its head minus confirmations. It returns -1
// when there is no such block yet.
func (c *Client) Target(ctx context.Context, finality Finality, confirmations uint64) (int64, error) {
	switch finality {
	case FinalityFinalized, FinalitySafe:
		h, err := c.HeaderByTag(ctx, string(finality))
		if errors.Is(err, ErrNoFinalityBlock) {
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
		return int64(h.Number), nil // at most MaxBlock (toHeader)
	case FinalityLatest:
		head, err := c.BlockNumber(ctx)
		if err != nil {
			return 0, err
		}
		if head < confirmations {
			return -1, nil
		}
		return int64(head - confirmations), nil // at most MaxBlock (BlockNumber)
	default:
		return 0, fmt.Errorf("unknown finality %q", finality)
	}
}

// HeaderByTag returns the header of the block named by tag ("latest",
// "safe", "finalized"). A node without such a block yet gives ErrNoFinalityBlock.
func (c *Client) HeaderByTag(ctx context.Context, tag string) (Header, error) {
	var h *rpcHeader
	err := c.call(ctx, &h, "eth_getBlockByNumber", tag, false)
	if err != nil {
		// geth: "finalized block not found" / "safe block not found".
		if (tag == "finalized" || tag == "safe") && strings.Contains(strings.ToLower(err.Error()), tag+" block not found") {
			return Header{}, fmt.Errorf("%s: %w", tag, ErrNoFinalityBlock)
		}
		return Header{}, err
	}
	if h == nil {
		if tag == "finalized" || tag == "safe" {
			return Header{}, fmt.Errorf("%s: %w", tag, ErrNoFinalityBlock)
		}
		return Header{}, fmt.Errorf("%s block: %w", tag, ErrNotFound)
	}
	hdr, err := h.toHeader()
	if err != nil {
		return Header{}, c.badReply("eth_getBlockByNumber", err)
	}
	return hdr, nil
}

// HeadersByNumber returns the canonical headers of blocks ns, asked in
// batches. A block the node does not have fails the call (ErrNotFound).
func (c *Client) HeadersByNumber(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	return c.headers(ctx, ns)
}

// HeaderByNumber returns the canonical header of block n.
func (c *Client) HeaderByNumber(ctx context.Context, n uint64) (Header, error) {
	hs, err := c.headers(ctx, []uint64{n})
	if err != nil {
		return Header{}, err
	}
	return hs[n], nil
}

// Range is a node's answer for one block range: the range's end headers, its
// burns, and the logs of the burn event that did not decode.
type Range struct {
	// From and To are the canonical headers of the first and last block.
	From, To Header
	Burns    []Burn
	Rejected []Rejected
	// Hidden is how many of the logs came from receipts, not from the
	// eth_getLogs reply, which had left them out.
	Hidden int
}

// BurnRange fetches the burn logs of contracts in [from, to] with, in the
// same JSON-RPC batch, the headers of blocks from and to, then the headers of
// every other block holding a log, and validates the reply: each log must be
// a LogBurnWithDigest from one of contracts inside the range and carry its
// block's canonical hash. Then receipts confirm it (Options.VerifyReceipts)
// and resolve the blocks whose bloom holds a burn the reply lacks. An
// inconsistent reply gives an error of ClassBadReply.
func (c *Client) BurnRange(ctx context.Context, contracts []common.Address, from, to uint64) (Range, error) {
	if from > to {
		return Range{}, fmt.Errorf("empty range [%d, %d]", from, to)
	}
	if len(contracts) == 0 {
		return Range{}, errors.New("no contract to read")
	}
	var address any = contracts
	if len(contracts) == 1 {
		address = contracts[0]
	}
	filter := map[string]any{
		"fromBlock": hexutil.Uint64(from),
		"toBlock":   hexutil.Uint64(to),
		"address":   address,
		"topics":    [][]common.Hash{{BurnTopic}},
	}
	var (
		logs           []types.Log
		fromHdr, toHdr *rpcHeader
		scan           = &logScan{}
	)
	elems := []rpc.BatchElem{
		{Method: "eth_getLogs", Args: []any{filter}, Result: &logs},
		{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(from), false}, Result: &fromHdr},
	}
	if to != from {
		// A one-block range's first block is its last: one header.
		elems = append(elems, rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(to), false}, Result: &toHdr})
	}
	err := c.batch(withLogScan(ctx, scan), elems)
	if err != nil {
		var e *Error
		if errors.Is(err, ErrResponseTooLarge) && errors.As(err, &e) {
			cut := scan.reached()
			e.cut = &cut
		}
		return Range{}, err
	}
	if to == from {
		toHdr = fromHdr
	}
	canonical := make(map[uint64]Header, 2)
	for _, h := range []struct {
		raw  *rpcHeader
		want uint64
	}{{fromHdr, from}, {toHdr, to}} {
		hdr, err := h.raw.checked(h.want)
		if err != nil {
			return Range{}, c.badReply("eth_getBlockByNumber", err)
		}
		canonical[h.want] = hdr
	}
	return c.settle(ctx, contracts, from, to, logs, canonical)
}

// settle checks the logs a node gave for blocks [from, to] of contracts
// and makes them a Range: canonical holds the headers read with them (at
// least from's and to's), in the same batch as the logs or after it. Each
// log must be a burn-event log of contracts inside the range and carry the
// canonical hash of its block; then receipts confirm it
// (Options.VerifyReceipts, unless ctx credits nothing) and resolve the
// blocks whose bloom holds a burn the reply lacks.
func (c *Client) settle(ctx context.Context, contracts []common.Address, from, to uint64, logs []types.Log, canonical map[uint64]Header) (Range, error) {
	burns, rejected, err := ValidateLogs(logs, contracts, from, to)
	if err != nil {
		return Range{}, c.badReply("eth_getLogs", err)
	}

	// Every log must sit in the block the node calls canonical. With the
	// receipts check, the receipts of each block holding logs are asked by
	// block number, so they are the canonical block's, and the hash they
	// carry is the block's canonical hash: no header is needed besides the
	// range's ends. Without it, the headers of the other blocks holding
	// logs are read (while the receipts of blocks chosen by their bloom
	// are).
	verify := c.opts.VerifyReceipts && !creditsNothing(ctx)
	var missing []uint64
	for _, l := range logs {
		if _, ok := canonical[l.BlockNumber]; !ok && !verify && !slices.Contains(missing, l.BlockNumber) {
			missing = append(missing, l.BlockNumber)
		}
	}
	check := receiptBlocks(logs, contracts, canonical, verify)
	var (
		more     map[uint64]Header
		receipts map[uint64][]rpcReceipt
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { more, err = c.headers(gctx, missing); return err })
	g.Go(func() (err error) { receipts, err = c.receipts(gctx, check.blocks, check.logs); return err })
	if err := g.Wait(); err != nil {
		return Range{}, err
	}
	for n, h := range more {
		canonical[n] = h
	}
	if err := c.hashesFromReceipts(&check, receipts, canonical); err != nil {
		return Range{}, err
	}
	for _, l := range logs {
		if h := canonical[l.BlockNumber]; l.BlockHash != h.Hash {
			return Range{}, c.badReply("eth_getLogs", fmt.Errorf("%w: log of tx %s index %d has block hash %s, canonical block %d has %s",
				ErrBadReply, l.TxHash.Hex(), l.Index, l.BlockHash.Hex(), l.BlockNumber, h.Hash.Hex()))
		}
	}
	r := Range{From: canonical[from], To: canonical[to], Burns: burns, Rejected: rejected}
	if err := c.crossCheck(&r, check, receipts, contracts); err != nil {
		return Range{}, err
	}
	return r, nil
}

// fetchParallel is how many batches of one kind (headers, receipts) a
// range has in flight at once: a range's round trips overlap rather than
// queue, while a provider sees a few requests at a time, not a flood.
const fetchParallel = 4

// headers fetches the canonical headers of blocks ns, in batches, up to
// fetchParallel of them at a time.
func (c *Client) headers(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	out := make(map[uint64]Header, len(ns))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallel)
	for chunk := range slices.Chunk(ns, c.opts.HeaderBatch) {
		g.Go(func() error {
			raws := make([]*rpcHeader, len(chunk))
			elems := make([]rpc.BatchElem, len(chunk))
			for i, n := range chunk {
				elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(n), false}, Result: &raws[i]}
			}
			if err := c.batch(gctx, elems); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, n := range chunk {
				h, err := raws[i].checked(n)
				if err != nil {
					return c.badReply("eth_getBlockByNumber", err)
				}
				out[n] = h
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *Client) call(ctx context.Context, result any, method string, args ...any) error {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := c.roundTrip(rctx,
		func() error { return c.httpCall(rctx, c.httpc, result, method, args) },
		func(w *wsConn) error { return w.call(rctx, result, method, args) })
	if err != nil {
		res, e := c.failure(ctx, err, method)
		c.opts.Observer.RPC(c.display, method, res, time.Since(start))
		return e
	}
	c.answered.Store(time.Now().UnixNano())
	c.opts.Observer.RPC(c.display, method, ResultOK, time.Since(start))
	return nil
}

func (c *Client) batch(ctx context.Context, elems []rpc.BatchElem) error {
	if len(elems) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := c.roundTrip(rctx,
		func() error { return c.httpBatch(rctx, c.httpc, elems) },
		func(w *wsConn) error { return w.batch(rctx, elems) })
	took := time.Since(start)
	if err != nil {
		res, e := c.failure(ctx, err, "batch")
		for _, el := range elems {
			c.opts.Observer.RPC(c.display, el.Method, res, took)
		}
		return e
	}
	c.answered.Store(time.Now().UnixNano())
	var first *Error
	for _, el := range elems {
		if el.Error == nil {
			c.opts.Observer.RPC(c.display, el.Method, ResultOK, took)
			continue
		}
		e := classify(redactError(el.Error, c.rawURL, c.display), c.display, el.Method)
		c.opts.Observer.RPC(c.display, el.Method, string(e.Class), took)
		if first == nil {
			first = e
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// roundTrip sends a request: overHTTP for an HTTP endpoint, overWS on
// the WebSocket connection, dialled if need be, and once more on a new
// one if the connection was lost before the request was written (another
// request's reply broke it in between). A closed client sends nothing.
func (c *Client) roundTrip(ctx context.Context, overHTTP func() error, overWS func(*wsConn) error) error {
	for try := 0; ; try++ {
		w, err := c.conn(ctx)
		switch {
		case err != nil:
			return err
		case c.httpc != nil:
			return overHTTP()
		}
		err = overWS(w)
		if !errors.Is(err, errNotSent) || try == 1 {
			return err
		}
	}
}

// failure turns a failed request into the error to return and the result
// to observe. When the caller's ctx has ended, the node is not at fault:
// the error wraps ctx's (context.Canceled or context.DeadlineExceeded) and
// is no *Error. Otherwise, the request timeout included, it is classified.
func (c *Client) failure(ctx context.Context, err error, method string) (result string, _ error) {
	if ctx.Err() != nil {
		return ResultCanceled, fmt.Errorf("%s on %s: %w", method, c.display, ctx.Err())
	}
	e := classify(redactError(err, c.rawURL, c.display), c.display, method)
	return string(e.Class), e
}

// badReply wraps a validation failure as an *Error of ClassBadReply.
func (c *Client) badReply(method string, err error) error {
	c.opts.Observer.BadReply(c.display, method)
	return &Error{Class: ClassBadReply, Endpoint: c.display, Method: method, Err: err}
}

// rpcHeader is the minimum of a block object; fields are pointers so that a
// missing one is an error rather than a zero. The reply reader reads it
// (readHeaderOrNull).
type rpcHeader struct {
	Number     *hexutil.Big    `json:"number"`
	Hash       *common.Hash    `json:"hash"`
	ParentHash *common.Hash    `json:"parentHash"`
	Timestamp  *hexutil.Uint64 `json:"timestamp"`
	LogsBloom  *types.Bloom    `json:"logsBloom"`
	// Transactions are hashes: every block is asked without its
	// transactions in full.
	Transactions []common.Hash `json:"transactions"`
}

func (h *rpcHeader) toHeader() (Header, error) {
	if h.Number == nil || h.Hash == nil || h.ParentHash == nil || h.Timestamp == nil {
		return Header{}, fmt.Errorf("%w: block object lacks number, hash, parentHash or timestamp", ErrBadReply)
	}
	n := (*big.Int)(h.Number)
	if !n.IsUint64() || n.Uint64() > MaxBlock {
		return Header{}, fmt.Errorf("%w: block number %s out of range", ErrBadReply, n)
	}
	if *h.Hash == (common.Hash{}) {
		return Header{}, fmt.Errorf("%w: block %s has a zero hash", ErrBadReply, n)
	}
	hdr := Header{Number: n.Uint64(), Hash: *h.Hash, ParentHash: *h.ParentHash, Time: uint64(*h.Timestamp), Txs: h.Transactions}
	if h.LogsBloom != nil {
		hdr.Bloom = *h.LogsBloom
	}
	return hdr, nil
}

// checked converts a header fetched by number, which must exist and be that block.
func (h *rpcHeader) checked(want uint64) (Header, error) {
	if h == nil {
		return Header{}, fmt.Errorf("%w: header of block %d: %w", ErrBadReply, want, ErrNotFound)
	}
	hdr, err := h.toHeader()
	if err != nil {
		return Header{}, err
	}
	if hdr.Number != want {
		return Header{}, fmt.Errorf("%w: asked for block %d, got header of %d", ErrBadReply, want, hdr.Number)
	}
	return hdr, nil
}

// MaxBlock is the highest block number chain hands out: a header, a log or
// a head above it is a bad reply. It leaves every number chain returns
// room in an int64, the ledger's type, with no check at the caller.
const MaxBlock = 1 << 62
