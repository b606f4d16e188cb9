package chain_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/hostile"
)

// TestTinyWebSocketMessagesAreBounded: a node on WebSocket that sends,
// before its reply, many tiny messages that answer nothing ({}, 4 bytes a
// frame on the wire) costs the client at most allocPerByte times what it
// sent: one buffer and one reader serve every message of a connection (a
// 4 KiB bufio.Reader and two reply readers for each cost 1,229 times).
func TestTinyWebSocketMessagesAreBounded(t *testing.T) {
	const messages = 1 << 16
	flood := make([]byte, 0, 4*messages)
	for range messages {
		flood = append(flood, 0x81, 2, '{', '}') // FIN, text; unmasked, 2 bytes
	}
	boundedFlood(t, flood, nil)
}

// TestAPingFloodIsBounded: a node on WebSocket that sends, before its
// reply, many pings (2 bytes a frame without a payload, 6 with one) made
// the client allocate about 200 times what it sent: gorilla/websocket's
// handler writes a pong for every ping. The client answers the latest
// ping, with its payload, and no more often than wsPongSpacing (100 ms).
func TestAPingFloodIsBounded(t *testing.T) {
	for _, payload := range []string{"", "ping"} {
		t.Run(fmt.Sprintf("pings of %d bytes", len(payload)), func(t *testing.T) {
			const pings = 1 << 16
			flood := make([]byte, 0, (2+len(payload))*pings+8)
			for range pings {
				flood = append(append(flood, 0x89, byte(len(payload))), payload...) // FIN, ping; unmasked
			}
			last := "last"
			flood = append(append(flood, 0x89, byte(len(last))), last...)
			pongs := make(chan string, 1<<10)
			boundedFlood(t, flood, pongs)
			// The latest ping is answered, with its payload, by a few pongs
			// for the whole flood.
			answered := 0
			for got := ""; got != last; answered++ {
				select {
				case got = <-pongs:
				case <-time.After(10 * time.Second):
					t.Fatalf("no pong carried the last ping's %q after %d pongs", last, answered)
				}
			}
			if answered > 10 {
				t.Errorf("%d pongs for %d pings sent at once, want the latest answered, a pong at most every 100 ms", answered, pings+1)
			}
		})
	}
}

// idLastReply is a reply to call id giving block n's header, its result
// before its id (JSON leaves the order free; readReply reads it), the header's
// extraData so long that the id's first digit is the 4,096th byte of the
// reply and the rest come after it.
func idLastReply(id string, n uint64) []byte {
	const at = 4095 // the offset of the id's first digit
	h := shapeHeader(n)
	build := func(hexDigits int, size string) []byte {
		return []byte(`{"jsonrpc":"2.0","result":{"extraData":"0x` + strings.Repeat("ab", hexDigits/2) + `","size":"` + size + `",` + h[1:] + `,"id":` + id + `}`)
	}
	short := len(build(0, "0x1")) - len(id+`}`)
	need := at - short
	size := "0x1"
	if need%2 != 0 {
		size, need = "0x10", need-1
	}
	return build(need, size)
}

// TestWebSocketIDAcrossThePeekIsRead: over WebSocket a reply is routed
// by the id found in its first 4 KiB (wsPeek). A reply whose id comes
// after its result, its digits straddling the 4,096th byte, is routed by
// its whole id: read by the digits before the cut, "10" was 1, and the
// reply to call 10 (eth_getBlockByNumber "latest", block 100) was decoded
// into call 1 (eth_getBlockByNumber "finalized", still waiting), which
// returned block 100 as finalized while call 10 never got its reply.
func TestWebSocketIDAcrossThePeekIsRead(t *testing.T) {
	if r := idLastReply("10", 100); r[4095] != '1' || r[4096] != '0' {
		t.Fatalf("the id is not across the peek: %q", r[4090:4100])
	}
	gotFinalized := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var finalizedID string
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var c struct {
				ID     json.RawMessage   `json:"id"`
				Params []json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(msg, &c)
			if len(c.Params) > 0 && string(c.Params[0]) == `"finalized"` {
				// The node is slow to say which block is finalized.
				finalizedID = string(c.ID)
				close(gotFinalized)
				continue
			}
			if err := conn.WriteMessage(websocket.TextMessage, idLastReply(string(c.ID), 100)); err != nil {
				return
			}
			if string(c.ID) == "10" && finalizedID != "" {
				time.Sleep(200 * time.Millisecond)
				_ = conn.WriteMessage(websocket.TextMessage, idLastReply(finalizedID, 5))
			}
		}
	}))
	defer srv.Close()
	c, err := chain.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), chain.Options{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type res struct {
		h   chain.Header
		err error
	}
	finalized := make(chan res, 1)
	go func() {
		h, err := c.HeaderByTag(t.Context(), "finalized") // id 1
		finalized <- res{h, err}
	}()
	<-gotFinalized
	for id := 2; id <= 10; id++ {
		h, err := c.HeaderByTag(t.Context(), "latest")
		if err != nil || h.Number != 100 {
			t.Errorf("call %d (latest): block %d, %v; want block 100", id, h.Number, err)
		}
	}
	f := <-finalized
	if f.err != nil || f.h.Number != 5 {
		t.Errorf("call 1 (finalized): block %d, %v; want block 5, the node's finalized block", f.h.Number, f.err)
	}
}

// TestWebSocketMessagesOfAnyShapeAreBounded: whatever a node's
// messages that answer nothing hold (JSON or not, an id of no request, an
// id that is no number, a batch of no reply, a notification, a message
// just past what is peeked for its id), reading them allocates at most
// allocPerByte times their bytes: a malformed message's error is not
// made, and a message read whole for its id is held in as much memory.
func TestWebSocketMessagesOfAnyShapeAreBounded(t *testing.T) {
	shapes := map[string]string{
		"one byte not JSON":  "x",
		"an object cut":      "{",
		"an array cut":       "[",
		"a string cut":       `"`,
		"a member cut":       `{"a":}`,
		"null":               "null",
		"an id not a number": `{"id":"x"}`,
		"an id cut":          `{"id":-}`,
		"an id of no call":   `{"id":99999}`,
		"an id in exponent":  `{"id":1e3}`,
		"a long id":          `{"id":12345678901234567890123}`,
		"a batch of numbers": "[1]",
		"a notification":     `{"method":"eth_subscription"}`,
		"past the peek":      strings.Repeat(" ", 4096) + "{}",
		"past the peek cut":  strings.Repeat(" ", 4096) + "{",
	}
	for name, msg := range shapes {
		t.Run(name, func(t *testing.T) {
			frame := append([]byte{0x81}, wsLength(len(msg))...)
			frame = append(frame, msg...)
			count := max(1, (1<<18)/len(frame))
			flood := make([]byte, 0, count*len(frame))
			for range count {
				flood = append(flood, frame...)
			}
			alloc, n, err := floodBeforeReply(t, flood, nil)
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(alloc) / float64(n)
			t.Logf("%d messages (%d bytes on the wire): %d bytes allocated (%.2f ×)", count, n, alloc, ratio)
			if alloc > allocPerByte*uint64(n) {
				t.Errorf("%d bytes allocated for %d bytes of messages (%.2f ×), want at most %d ×", alloc, n, ratio, allocPerByte)
			}
		})
	}
}

// wsLength is a server frame's length bytes (unmasked) for n bytes.
func wsLength(n int) []byte {
	if n < 126 {
		return []byte{byte(n)}
	}
	return []byte{126, byte(n >> 8), byte(n)}
}

// boundedFlood fails t unless a call to a node that sends flood before
// its reply succeeds within allocPerByte times the flood's bytes
// (floodBeforeReply).
func boundedFlood(t *testing.T, flood []byte, pongs chan<- string) {
	t.Helper()
	alloc, n, err := floodBeforeReply(t, flood, pongs)
	ratio := float64(alloc) / float64(n)
	t.Logf("%.2f MiB of frames: %.1f MiB allocated (%.1f ×); %v", float64(n)/(1<<20), float64(alloc)/(1<<20), ratio, err)
	if err != nil {
		t.Errorf("the call after the frames: %v", err)
	}
	if alloc > allocPerByte*uint64(n) {
		t.Errorf("%d bytes allocated for %d bytes of frames (%.1f ×), want at most %d ×", alloc, n, ratio, allocPerByte)
	}
}

// floodBeforeReply calls a node that sends flood, raw frames, before
// each reply after the first, and returns what the call allocated, the
// flood's size and the call's error. The pongs the node reads after its
// first flood go to pongs, if not nil, as long as t runs.
func floodBeforeReply(t *testing.T, flood []byte, pongs chan<- string) (alloc uint64, n int, err error) {
	t.Helper()
	var flooded atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetPongHandler(func(data string) error {
			if pongs != nil && flooded.Load() {
				select {
				case pongs <- data:
				default:
				}
			}
			return nil
		})
		for n := 0; ; n++ {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var c struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal(msg, &c)
			reply := []byte(`{"jsonrpc":"2.0","id":` + string(c.ID) + `,"result":"0x1"}`)
			frame := append([]byte{0x81, byte(len(reply))}, reply...)
			if n > 0 { // the first call is answered plainly: the dial is not measured
				if _, err := conn.UnderlyingConn().Write(flood); err != nil {
					return
				}
				flooded.Store(true)
			}
			if _, err := conn.UnderlyingConn().Write(frame); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	c, err := chain.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), chain.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.ChainID(t.Context()); err != nil {
		t.Fatal(err)
	}
	alloc = hostile.Allocated(func() { _, err = c.ChainID(t.Context()) })
	if pongs != nil {
		// The node reads the pongs while it waits for the next call.
		go func() { _, _ = c.ChainID(t.Context()) }()
	}
	return alloc, len(flood), err
}
