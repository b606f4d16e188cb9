package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math/big"
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
