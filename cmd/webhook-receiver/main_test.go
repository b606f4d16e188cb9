package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

func TestReceiverVerifiesAndDeduplicates(t *testing.T) {
	const secret = "whsec-receiver-test-0123"
	var logs bytes.Buffer
	srv := httptest.NewServer(newHandler(secret, slog.New(slog.NewJSONHandler(&logs, nil))))
	defer srv.Close()
	e := payments.EventFor(payments.KindConfirmed, payments.Payment{ChainID: 1, TxHash: "0xab", BlockHash: "0xcd", Amount: big.NewInt(5)}, 9)
	e.Seq = 3
	body, _ := json.Marshal(e)
	post := func(sig, id string, b []byte) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(b))
		req.Header.Set(webhooks.HeaderSignature, sig)
		req.Header.Set(webhooks.HeaderEventID, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	good := webhooks.Sign(secret, time.Now(), body)
	for _, tt := range []struct {
		name     string
		sig, id  string
		body     []byte
		wantCode int
	}{
		{"valid", good, e.EventID, body, http.StatusNoContent},
		{"again", good, e.EventID, body, http.StatusNoContent},
		{"other secret", webhooks.Sign("another-secret-0123456", time.Now(), body), e.EventID, body, http.StatusUnauthorized},
		{"stale", webhooks.Sign(secret, time.Now().Add(-time.Hour), body), e.EventID, body, http.StatusUnauthorized},
		{"altered body", good, e.EventID, bytes.Replace(body, []byte(`"5"`), []byte(`"6"`), 1), http.StatusUnauthorized},
		{"other id", good, "1:0xab:0:seen:0xcd", body, http.StatusBadRequest},
	} {
		if code := post(tt.sig, tt.id, tt.body); code != tt.wantCode {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.wantCode)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"payment event"`); n != 2 || !strings.Contains(logs.String(), `"duplicate":true`) {
		t.Fatalf("logged %d deliveries:\n%s", n, logs.String())
	}
}

// TestReceiverBoundsTheBody: a sender that stalls in the middle of the
// body is cut off once the read timeout passes (the body is read before
// the signature can be checked, so anyone could hold connections so), and
// a body over the cap is refused without being read.
func TestReceiverBoundsTheBody(t *testing.T) {
	t.Parallel()
	const readTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer("", newHandler("whsec-receiver-test-0123", slog.New(slog.DiscardHandler)), readTimeout)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	tests := []struct {
		name string
		give string // what the sender writes before it stalls
		want string // the start of the answer, "" for none
	}{
		{"a stalled body", "POST / HTTP/1.1\r\nHost: r\r\nContent-Length: 1000\r\n\r\n{\"seq\":", ""},
		{"a Content-Length over the cap", fmt.Sprintf("POST / HTTP/1.1\r\nHost: r\r\nContent-Length: %d\r\n\r\n", maxBody+1), "HTTP/1.1 413"},
		{"a chunked body over the cap", fmt.Sprintf("POST / HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", maxBody+1, strings.Repeat("a", maxBody+1)), "HTTP/1.1 413"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tt.give); err != nil {
				t.Fatal(err)
			}
			// The guard is far past the read timeout, and the server
			// must end the connection well before it.
			_ = conn.SetReadDeadline(time.Now().Add(20 * readTimeout))
			answer, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("the connection is still open: %v (read %q)", err, answer)
			}
			if !strings.HasPrefix(string(answer), tt.want) {
				t.Fatalf("answer %q, want it to start with %q", answer, tt.want)
			}
		})
	}
}
