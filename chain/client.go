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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
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
