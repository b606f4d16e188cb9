package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/gorilla/websocket"

	"github.com/burnpoller/burnpoller/chain"
)

// wsNode is a WebSocket JSON-RPC peer at the RPC boundary: every text
// message is a request or a batch, answered from handle as fakeNode does
// over HTTP, each in its own goroutine so that a slow answer does not hold
// up the others on the connection.
type wsNode struct {
	fakeNode
	// subscription, when set, makes the peer answer eth_subscribe with this
	// id and then answer nothing else: a peer that hangs after subscribing.
	subscription string

	mu      sync.Mutex
	conns   int
	methods []string // every method received, eth_subscribe included
	// gone receives a value each time a connection ends (the client hung
	// up, or the server closed), without blocking.
	gone chan struct{}
}

func (n *wsNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	defer func() {
		select {
		case n.gone <- struct{}{}:
		default:
		}
	}()
	n.mu.Lock()
	n.conns++
	n.mu.Unlock()
	var writeMu sync.Mutex
	write := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		writeMu.Lock()
		defer writeMu.Unlock()
		_ = conn.WriteMessage(websocket.TextMessage, b)
	}
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var single rpcReq
		_ = json.Unmarshal(msg, &single)
		n.mu.Lock()
		n.methods = append(n.methods, single.Method)
		n.mu.Unlock()
		if n.subscription != "" {
			if single.Method == "eth_subscribe" {
				write(map[string]any{"jsonrpc": "2.0", "id": single.ID, "result": n.subscription})
			}
			continue // hung: never another answer
		}
		go write(n.reply(msg))
	}
}

func (n *wsNode) connections() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conns
}

func (n *wsNode) received() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.methods)
}

// startWS serves handle over WebSocket and returns the peer and its ws:// URL.
func startWS(t *testing.T, handle func(string, []json.RawMessage) (any, error)) (*wsNode, string) {
	t.Helper()
	n := &wsNode{fakeNode: fakeNode{handle: handle}, gone: make(chan struct{}, 16)}
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	return n, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// deadAddr returns a local address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener accepts TCP connections and never says a word: a
// WebSocket handshake to it hangs.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// A WebSocket reply over MaxResponseBytes is a range limit carrying
// ErrResponseTooLarge, as over HTTP, and the client reconnects for the next
// call.
func TestWebsocketReplyOverTheCap(t *testing.T) {
	t.Parallel()
	n := denseNode(10)
	peer, url := startWS(t, n.handle)
	c, err := chain.Dial(context.Background(), url, chain.Options{Timeout: 10 * time.Second, MaxResponseBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	// 100 blocks of 10 logs: 700 KiB of JSON, over the 64 KiB cap.
	_, err = c.BurnRange(ctx, []common.Address{contract}, 0, 99)
	if !errors.Is(err, chain.ErrResponseTooLarge) || chain.ClassOf(err) != chain.ClassRangeLimit {
		t.Fatalf("BurnRange = %v (class %s), want ErrResponseTooLarge of class %s", err, chain.ClassOf(err), chain.ClassRangeLimit)
	}
	// Five blocks of 10 logs fit; the connection closed by the oversized
	// reply is dialled again.
	r, err := c.BurnRange(ctx, []common.Address{contract}, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Burns) != 50 || r.To.Number != 4 {
		t.Fatalf("range: %d burns up to %d, want 50 up to 4", len(r.Burns), r.To.Number)
	}
	if got := peer.connections(); got != 2 {
		t.Fatalf("%d connections, want 2 (one closed by the oversized reply, then a new one)", got)
	}
}

// An unreachable WebSocket endpoint does not fail Dial: it is dialled on
// first use, within the client's timeout. Neither peer ever completes a
// handshake (one refuses, one accepts and says nothing for ever), so the
// first call can only end with a transient error; against the silent peer
// it ends because the 500 ms timeout bounds the dial (go-ethereum sets
// none, and the handshake would wait for ever). The minute-long guards only
// keep a broken client from hanging the test.
func TestWebsocketDialledOnFirstUse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		timeout bool // the call ends by the dial's deadline
	}{
		{"nothing listening", "ws://" + deadAddr(t), false},
		{"handshake never answered", "ws://" + silentListener(t), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obs := &recordingObserver{}
			type dialed struct {
				c   *chain.Client
				err error
			}
			dc := make(chan dialed, 1)
			go func() {
				c, err := chain.Dial(context.Background(), tt.url, chain.Options{Timeout: 500 * time.Millisecond, Observer: obs})
				dc <- dialed{c, err}
			}()
			var c *chain.Client
			select {
			case d := <-dc:
				if d.err != nil {
					t.Fatalf("Dial = %v, want no error before first use", d.err)
				}
				c = d.c
			case <-time.After(time.Minute):
				t.Fatal("Dial still blocked after a minute; it must not connect")
			}
			t.Cleanup(c.Close)
			errc := make(chan error, 1)
			go func() {
				_, err := c.ChainID(context.Background())
				errc <- err
			}()
			var err error
			select {
			case err = <-errc:
			case <-time.After(time.Minute):
				t.Fatal("first call still waiting a minute into a 500ms timeout")
			}
			var e *chain.Error
			if !errors.As(err, &e) || e.Class != chain.ClassTransient {
				t.Fatalf("ChainID = %v, want a transient *chain.Error", err)
			}
			if got := isTimeout(err); got != tt.timeout {
				t.Fatalf("ChainID = %v: ended by a timeout %v, want %v", err, got, tt.timeout)
			}
			if got := strings.Join(obs.got, ","); got != "eth_chainId=transient" {
				t.Fatalf("observed %s", got)
			}
		})
	}
}

// isTimeout reports whether err says a deadline ran out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

// One endpoint down, wherever it is listed, does not stop the set: Verify
// passes and the working endpoint serves.
func TestUnreachableWebsocketEndpointHandsOver(t *testing.T) {
	t.Parallel()
	for _, wsFirst := range []bool{false, true} {
		name := map[bool]string{false: "backup down", true: "first down"}[wsFirst]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			good := node(200, 100)
			srv := httptest.NewServer(&fakeNode{handle: good.handle})
			t.Cleanup(srv.Close)
			opts := chain.Options{Timeout: 10 * time.Second}
			ctx := context.Background()
			httpC, err := chain.Dial(ctx, srv.URL, opts)
			if err != nil {
				t.Fatal(err)
			}
			wsC, err := chain.Dial(ctx, "ws://"+deadAddr(t), opts)
			if err != nil {
				t.Fatalf("Dial of an unreachable ws endpoint = %v, want no error", err)
			}
			clients := []*chain.Client{httpC, wsC}
			if wsFirst {
				clients = []*chain.Client{wsC, httpC}
			}
			e := chain.NewEndpoints(clients, chain.EndpointsConfig{ChainID: 1337, Finality: chain.FinalityFinalized}, nil,
				slog.New(slog.NewTextHandler(io.Discard, nil)))
			t.Cleanup(e.Close)
			if err := e.Verify(ctx); err != nil {
				t.Fatalf("Verify = %v", err)
			}
			got, err := e.Target(ctx)
			if err != nil || got.Block != 100 {
				t.Fatalf("Target = %+v, %v; want 100", got, err)
			}
			if _, err := e.BurnRange(ctx, []common.Address{contract}, 90, 100); err != nil {
				t.Fatal(err)
			}
			if n := len(good.requested()); n != 1 {
				t.Fatalf("the working endpoint served %d eth_getLogs, want 1", n)
			}
		})
	}
}

// WatchHeads returns once ctx ends even when the peer answers
// eth_subscribe and then nothing, for ever: it does not wait for an answer
// to eth_unsubscribe (go-ethereum would wait 10 s for it) but closes the
// connection. The peer sees exactly that: eth_subscribe, then the client
// hanging up, and never an eth_unsubscribe. The guards are many times any
// wait involved and only keep a broken WatchHeads from hanging the test.
func TestWatchHeadsReturnsPromptlyFromAHungPeer(t *testing.T) {
	t.Parallel()
	peer, url := startWS(t, nil)
	peer.subscription = "0x9cef478923ff08bf67fde6c64013158d"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	upCh := make(chan bool, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		chain.WatchHeads(ctx, url, make(chan struct{}, 1), func(b bool) { upCh <- b }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	select {
	case up := <-upCh:
		if !up {
			t.Fatal("subscription reported down before it was up")
		}
	case <-time.After(time.Minute):
		t.Fatal("subscription never up")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("WatchHeads still running a minute after ctx ended (received %v)", peer.received())
	}
	select {
	case <-peer.gone:
	case <-time.After(time.Minute):
		t.Fatal("WatchHeads returned but the connection to the peer is still open")
	}
	if got := peer.received(); !slices.Equal(got, []string{"eth_subscribe"}) {
		t.Fatalf("peer received %v, want eth_subscribe alone (no eth_unsubscribe to wait for)", got)
	}
	if n := peer.connections(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// A WebSocket node that starts a reply and stalls is cut off by the
// request's timeout, however long it stalls, and the next call dials a new
// connection, on which the node answers.
func TestWebsocketStalledReplyIsCutOff(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		conns int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		for {
			var req rpcReq
			if err := conn.ReadJSON(&req); err != nil {
				return
			}
			if !first {
				_ = conn.WriteJSON(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": "0x539"})
				continue
			}
			// A frame of the reply, then nothing more until the client
			// hangs up.
			wr, err := conn.NextWriter(websocket.TextMessage)
			if err != nil {
				return
			}
			fmt.Fprintf(wr, `{"jsonrpc":"2.0","id":%s,"result":"0x%s`, req.ID, strings.Repeat("0", 64<<10))
			_, _, _ = conn.ReadMessage()
			return
		}
	}))
	t.Cleanup(srv.Close)
	c, err := chain.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), chain.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	errc := make(chan error, 1)
	go func() {
		_, err := c.ChainID(context.Background())
		errc <- err
	}()
	select {
	case err := <-errc:
		if !isTimeout(err) || chain.ClassOf(err) != chain.ClassTransient {
			t.Fatalf("ChainID = %v, want a transient timeout", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ChainID still waiting a minute into a 300ms timeout")
	}
	id, err := c.ChainID(context.Background())
	if err != nil || id != 1337 {
		t.Fatalf("ChainID = %d, %v; want 1337 on a new connection", id, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 2 {
		t.Fatalf("%d connections, want 2", conns)
	}
}
