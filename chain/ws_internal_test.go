package chain

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/gorilla/websocket"
)

// wsPeer serves WebSocket connections: each message it reads is answered
// with answer(message), unless answer returns nil; the connection ends when
// the client hangs up.
func wsPeer(t *testing.T, answer func([]byte) []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			if out := answer(msg); out != nil {
				if err := conn.WriteMessage(websocket.TextMessage, out); err != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// A connection lost to a message over the read limit is marked lost before
// any request waiting on it hears why: CI caught a caller that called again
// at once being handed the same connection, whose error (the read limit of
// another reply) it then took for its own reply over the cap, narrowing a
// range to one block. A request that finds the connection lost is not
// sent, and its error is no reply over the cap.
func TestLostConnectionIsBrokenBeforeItsRequestsHear(t *testing.T) {
	t.Parallel()
	url := wsPeer(t, func(msg []byte) []byte {
		if strings.Contains(string(msg), "big") {
			return []byte(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", 4096) + `"}`)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := dialWS(ctx, url, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	// Two requests registered by hand, whose done channels are unbuffered:
	// the reader cannot tell the second until the test has heard the
	// first, so whatever it does after telling them all has not happened
	// when the first hears.
	reqs := []*wsRequest{
		{elems: []rpc.BatchElem{{Method: "big"}}, base: 1, lone: true, done: make(chan error)},
		{elems: []rpc.BatchElem{{Method: "other"}}, base: 2, lone: true, done: make(chan error)},
	}
	c.mu.Lock()
	for _, r := range reqs {
		c.pending[r.base] = r
	}
	c.nextID = 3
	c.mu.Unlock()
	if err := c.write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"big"}`)); err != nil {
		t.Fatal(err)
	}
	var first error
	heard := 0
	select {
	case first = <-reqs[0].done:
		heard = 0
	case first = <-reqs[1].done:
		heard = 1
	case <-ctx.Done():
		t.Fatal("no request heard of the lost connection")
	}
	broken := c.broken()
	if err := <-reqs[1-heard].done; !errors.Is(err, websocket.ErrReadLimit) {
		t.Fatalf("the other request failed with %v, want the read limit", err)
	}
	if !errors.Is(first, websocket.ErrReadLimit) {
		t.Fatalf("a request failed with %v, want the read limit", first)
	}
	if !broken {
		t.Fatal("a request heard of the lost connection before the connection was marked lost")
	}
	var n hexutil.Uint64
	err = c.call(ctx, &n, "eth_blockNumber", nil)
	if !errors.Is(err, errNotSent) || errors.Is(err, websocket.ErrReadLimit) {
		t.Fatalf("a call on the lost connection gave %v, want errNotSent not wrapping the read limit", err)
	}
}

// A request not sent because the connection was lost in between (another
// request's reply broke it) is sent again, once, on a new connection.
func TestRequestNotSentIsSentOnANewConnection(t *testing.T) {
	t.Parallel()
	url := wsPeer(t, func(msg []byte) []byte {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(msg, &req)
		return []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":"0x2a"}`)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Dial(ctx, url, Options{Timeout: 10 * time.Second, MaxResponseBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, tc := range []struct {
		name     string
		lost     int // how many tries find the connection lost
		wantErr  bool
		wantSent int
	}{
		{name: "lost once", lost: 1, wantSent: 2},
		{name: "lost twice", lost: 2, wantErr: true, wantSent: 2},
	} {
		tries := 0
		var n hexutil.Uint64
		err := c.roundTrip(ctx, func() error {
			t.Fatal("a WebSocket client sent over HTTP")
			return nil
		}, func(w *wsConn) error {
			tries++
			if tries <= tc.lost {
				return errNotSent
			}
			return w.call(ctx, &n, "eth_blockNumber", nil)
		})
		if tries != tc.wantSent || (err != nil) != tc.wantErr {
			t.Fatalf("%s: %d tries, error %v; want %d tries, error %v", tc.name, tries, err, tc.wantSent, tc.wantErr)
		}
		if !tc.wantErr && n != 42 {
			t.Fatalf("%s: result %d, want 42", tc.name, n)
		}
	}
}

// A closed client sends nothing, over HTTP as over WebSocket: its calls
// fail with errClosed.
func TestClosedClientSendsNothing(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"0x2a"}`))
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, url := range []string{srv.URL, "ws" + strings.TrimPrefix(srv.URL, "http")} {
		c, err := Dial(ctx, url, Options{Timeout: 10 * time.Second, MaxResponseBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		var n hexutil.Uint64
		if err := c.call(ctx, &n, "eth_blockNumber"); !errors.Is(err, errClosed) {
			t.Fatalf("%s: a call on a closed client = %v, want errClosed", url, err)
		}
	}
	if got := requests.Load(); got != 0 {
		t.Fatalf("%d requests reached the node from closed clients, want none", got)
	}
}

// An id read from the start of a message (cut) counts only if something
// follows it there: a number at the end may go on past it ("1" of "10"),
// and a string ending there is taken alike (the whole message is then read
// for it, which costs nothing but time). In a whole message an id is what
// it reads.
func TestFirstIDOfAMessageCutIsWhole(t *testing.T) {
	for _, tt := range []struct {
		msg   string
		cut   bool
		id    int64
		found bool
	}{
		{`{"result":"0x1","id":1`, true, 0, false},
		{`{"result":"0x1","id":"1"`, true, 0, false},
		{`{"result":"0x1","id":12}`, true, 12, true},
		{`{"result":"0x1","id":12 `, true, 12, true},
		{`{"result":"0x1","id":12,`, true, 12, true},
		{`[{"result":"0x1","id":3`, true, 0, false},
		{`[1,null,{"result":"0x1","id":3}]`, false, 3, true},
		{`{"id":"-7"}`, false, -7, true},
		{`{"id":1234567890123456789}`, false, 0, false},
		{`{"id":"x","id":5}`, false, 5, true},
		{`{"id":1e3}`, false, 0, false},
	} {
		in := newWSInbox()
		id, _, found := in.firstID([][]byte{[]byte(tt.msg)}, tt.cut)
		if id != tt.id || found != tt.found {
			t.Errorf("firstID(%s, cut %t) = %d, %t; want %d, %t", tt.msg, tt.cut, id, found, tt.id, tt.found)
		}
	}
}
