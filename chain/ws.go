package chain

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/gorilla/websocket"
)

// The WebSocket connection's keep-alive: a ping every wsPingInterval, and a
// connection from which nothing (a reply, a notification, a pong) came for
// wsIdleTimeout is lost. go-ethereum's client pings as often.
const (
	wsPingInterval = 30 * time.Second
	wsIdleTimeout  = 2 * wsPingInterval
	// wsWriteTimeout bounds a write whose context has no deadline.
	wsWriteTimeout = 10 * time.Second
	// wsPongSpacing is the least time between two pongs.
	wsPongSpacing = 100 * time.Millisecond
	// maxHandshakeBytes bounds what is read of the node until the
	// connection is up: the TLS handshake, if any, and the answer's
	// headers, of which maxResponseHeaderBytes.
	maxHandshakeBytes = maxResponseHeaderBytes + 64<<10
)

// wsConn is one WebSocket connection to a node. Calls and batches are
// written as they come, each with ids of its own, and one goroutine reads
// the replies and decodes each into the request it answers with the reader
// of HTTP replies (decodeCall, decodeBatch), which reads a node's errors
// only as far as they are used: go-ethereum's client, which this replaces,
// builds an error's data whole. A connection whose reading failed (a reply
// over the limit, a lost peer) is done: every request on it fails with
// that error, and the caller dials a new one.
type wsConn struct {
	conn *websocket.Conn
	// notify, if set, is called (by the reader) for every subscription
	// notification.
	notify  func()
	writeMu sync.Mutex

	mu      sync.Mutex
	nextID  int64
	pending map[int64]*wsRequest // by the first id of each
	err     error                // why reading ended, once it has

	done chan struct{} // closed when reading ends
	wg   sync.WaitGroup

	// pong is the payload of the node's latest ping, which pongDue says is
	// not answered yet: the pinger answers the latest ping only (RFC 6455,
	// 5.5.3, allows it), at most once every wsPongSpacing, so that a flood
	// of pings costs neither a pong nor an allocation each (gorilla's own
	// handler writes one for every ping, at about 200 times its bytes).
	pongMu  sync.Mutex
	pong    [125]byte // a control frame's payload is at most 125 bytes
	pongLen int
	pongDue chan struct{}
}

// wsRequest is a call (lone) or a batch waiting for its reply.
type wsRequest struct {
	elems []rpc.BatchElem
	base  int64 // the id of elems[0]; elems[i] has base+i
	lone  bool
	done  chan error // the reply's decoding, or the connection's failure
}

// dialWS opens a WebSocket connection to rawURL within ctx: user info in
// the URL becomes a basic Authorization header, as with go-ethereum's
// client. Messages from the node are limited to limit bytes, and what is
// read before the connection is up to maxHandshakeBytes (gorilla/websocket
// reads the answer's headers unbounded); notify, if set, hears each
// subscription notification.
func dialWS(ctx context.Context, rawURL string, limit int64, notify func()) (*wsConn, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	if u.User != nil {
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.String())))
		u.User = nil
	}
	var handshake *boundedConn
	dialer := websocket.Dialer{
		Proxy: http.ProxyFromEnvironment,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := new(net.Dialer).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			handshake = &boundedConn{Conn: conn}
			handshake.left.Store(maxHandshakeBytes)
			return handshake, nil
		},
	}
	conn, resp, err := dialer.DialContext(ctx, u.String(), header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return nil, err
	}
	if handshake != nil {
		handshake.left.Store(-1) // unbounded from here on: the read limit holds
	}
	conn.SetReadLimit(limit)
	c := &wsConn{conn: conn, notify: notify, nextID: 1, pending: map[int64]*wsRequest{}, done: make(chan struct{}), pongDue: make(chan struct{}, 1)}
	_ = conn.SetReadDeadline(time.Now().Add(wsIdleTimeout))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(wsIdleTimeout)) })
	conn.SetPingHandler(c.pinged)
	c.wg.Add(2)
	go c.read()
	go c.ping()
	return c, nil
}

// boundedConn fails reads once left, when not negative, runs out.
type boundedConn struct {
	net.Conn
	left atomic.Int64
}

// errHandshakeTooLarge is a handshake answer past its bound.
var errHandshakeTooLarge = errors.New("websocket handshake answer larger than its limit")

func (b *boundedConn) Read(p []byte) (int, error) {
	left := b.left.Load()
	if left < 0 {
		return b.Conn.Read(p)
	}
	if left == 0 {
		return 0, errHandshakeTooLarge
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.Conn.Read(p)
	b.left.Add(-int64(n))
	return n, err
}

// call sends one call and decodes its reply into result.
func (c *wsConn) call(ctx context.Context, result any, method string, args []any) error {
	r := &wsRequest{elems: []rpc.BatchElem{{Method: method, Args: args, Result: result}}, lone: true}
	if err := c.send(ctx, r, func(id int64) ([]byte, error) {
		return json.Marshal(call{JSONRPC: "2.0", ID: int(id), Method: method, Params: args})
	}); err != nil {
		return err
	}
	return r.elems[0].Error
}

// batch sends elems as one batch and decodes each reply into its element.
func (c *wsConn) batch(ctx context.Context, elems []rpc.BatchElem) error {
	r := &wsRequest{elems: elems}
	return c.send(ctx, r, func(base int64) ([]byte, error) {
		calls := make([]call, len(elems))
		for i, el := range elems {
			calls[i] = call{JSONRPC: "2.0", ID: int(base) + i, Method: el.Method, Params: el.Args}
		}
		return json.Marshal(calls)
	})
}

// send writes r's request, made by body from r's first id, and waits for
// its reply until ctx ends.
func (c *wsConn) send(ctx context.Context, r *wsRequest, body func(base int64) ([]byte, error)) error {
	r.done = make(chan error, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		// Not the request's fault, and never its reply's: the reason is
		// told, not wrapped (a read limit another reply hit is no reply
		// of this one over the cap), and the caller sends it again on a
		// new connection.
		return fmt.Errorf("%w (%s)", errNotSent, c.err.Error())
	}
	r.base = c.nextID
	c.nextID += int64(len(r.elems))
	c.pending[r.base] = r
	c.mu.Unlock()
	b, err := body(r.base)
	if err == nil {
		err = c.write(ctx, b)
	}
	if err != nil {
		if c.forget(r) {
			return err
		}
		return <-r.done // the reader has it already
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	if c.forget(r) {
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	default:
	}
	// The reader is decoding r's reply as it comes, slower than the caller
	// waits, and every reply behind it waits too: the connection is given
	// up, which ends the reader's hold on r's results at once.
	_ = c.conn.Close()
	if err := <-r.done; err != nil {
		return fmt.Errorf("%w, with the reply still arriving: %w", ctx.Err(), err)
	}
	return nil // decoded in the meantime after all
}

// forget takes r out of the requests waiting for a reply, and says
// whether it was still waiting.
func (c *wsConn) forget(r *wsRequest) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[r.base] != r {
		return false
	}
	delete(c.pending, r.base)
	return true
}

func (c *wsConn) write(ctx context.Context, b []byte) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(wsWriteTimeout)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.conn.SetWriteDeadline(deadline)
	if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		// A write cut off midway leaves the stream unusable.
		_ = c.conn.Close()
		return err
	}
	return nil
}

// read hands each message to the request it answers until reading fails,
// then fails every request left with that error. What it reads a message
// with (wsInbox) is the same from one message to the next: a node's
// messages, however many and however small, cost no more than their bytes.
func (c *wsConn) read() {
	defer c.wg.Done()
	in := newWSInbox()
	for {
		_, mr, err := c.conn.NextReader()
		if err != nil {
			c.fail(err)
			return
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wsIdleTimeout))
		in.msg = messageReader{r: mr}
		r, err := c.dispatch(in)
		if in.msg.err != nil {
			// The connection failed in the middle of a message (one over
			// the limit, say): it is lost for every request, and marked so
			// before r's caller hears of it and calls again.
			c.fail(in.msg.err)
		}
		if r != nil {
			r.done <- err
		}
		if in.msg.err != nil {
			return
		}
	}
}

// errNotSent is a request not written because its connection was lost
// before: it is sent again on a new one.
var errNotSent = errors.New("request not sent: the connection was lost before it")

// answered takes out of the waiting requests the one id belongs to, if any.
func (c *wsConn) answered(id int64) *wsRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	for base, r := range c.pending {
		if id >= base && id < base+int64(len(r.elems)) {
			delete(c.pending, base)
			return r
		}
	}
	return nil
}

// fail ends the connection with err, the reason reading stopped. The
// connection is marked lost (broken) before any waiting request hears of
// it: a caller that calls again at once dials a new one instead of being
// handed this one and its error, which belongs to another reply.
func (c *wsConn) fail(err error) {
	_ = c.conn.Close()
	c.mu.Lock()
	c.err = fmt.Errorf("websocket connection lost: %w", err)
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
	for _, r := range pending {
		r.done <- c.err
	}
}

// ping keeps the connection alive while it is idle (the pongs move the
// read deadline, wsIdleTimeout), and answers the node's pings (pinged).
func (c *wsConn) ping() {
	defer c.wg.Done()
	t := time.NewTicker(wsPingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			_ = c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout))
		case <-c.pongDue:
			var pong [len(c.pong)]byte
			c.pongMu.Lock()
			n := copy(pong[:], c.pong[:c.pongLen])
			c.pongMu.Unlock()
			_ = c.conn.WriteControl(websocket.PongMessage, pong[:n], time.Now().Add(wsWriteTimeout))
			select {
			case <-c.done:
				return
			case <-time.After(wsPongSpacing):
			}
		}
	}
}

// pinged takes the node's ping of payload data, for ping to answer.
func (c *wsConn) pinged(data string) error {
	c.pongMu.Lock()
	c.pongLen = copy(c.pong[:], data)
	c.pongMu.Unlock()
	select {
	case c.pongDue <- struct{}{}:
	default: // a pong is due already: it carries this ping's payload
	}
	return nil
}

// lost is why reading ended, once it has.
func (c *wsConn) lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// broken says whether the connection is done.
func (c *wsConn) broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close ends the connection and waits for its goroutines.
func (c *wsConn) close() {
	_ = c.conn.Close()
	c.wg.Wait()
}
