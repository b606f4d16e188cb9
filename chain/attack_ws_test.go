package chain_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/hostile"
)

// TestAttackTinyWebSocketMessagesAreBounded: a node on WebSocket that
// sends, before its reply, many tiny messages that answer nothing ({},
// 4 bytes a frame on the wire) makes the client allocate over a thousand
// times what it sent: each message is given a 4 KiB bufio.Reader and two
// reply readers (wsConn.dispatch), whatever its size.
func TestAttackTinyWebSocketMessagesAreBounded(t *testing.T) {
	const messages = 1 << 16
	flood := make([]byte, 0, 4*messages+64)
	for range messages {
		flood = append(flood, 0x81, 2, '{', '}') // FIN, text; unmasked, 2 bytes
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
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
			}
			if _, err := conn.UnderlyingConn().Write(frame); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, err := chain.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), chain.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ChainID(t.Context()); err != nil {
		t.Fatal(err)
	}
	var callErr error
	alloc := hostile.Allocated(func() { _, callErr = c.ChainID(t.Context()) })
	n := len(flood)
	ratio := float64(alloc) / float64(n)
	t.Logf("%d tiny messages (%.2f MiB on the wire): %.1f MiB allocated (%.1f ×); %v", messages, float64(n)/(1<<20), float64(alloc)/(1<<20), ratio, callErr)
	if alloc > allocPerByte*uint64(n) {
		t.Errorf("%d bytes allocated for %d bytes of messages (%.1f ×), want at most %d ×", alloc, n, ratio, allocPerByte)
	}
}
