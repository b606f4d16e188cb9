package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

// receiver is a webhook endpoint for the tests: a real HTTP server that
// verifies each delivery's signature and body, records the event ids it
// accepted, and can be told to fail.
type receiver struct {
	t      *testing.T
	secret string
	srv    *httptest.Server
	mu     sync.Mutex
	got    map[string]payments.Event // event id -> event, accepted
	tries  map[string]int
	mode   string // "", "500", "hang", "drop"
	bad    []string
}

func startReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	r := &receiver{t: t, secret: secret, got: map[string]payments.Event{}, tries: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the endpoint's address, with a token in the path as real
// receivers often have (it must never show in logs or metrics).
func (r *receiver) URL() string { return r.srv.URL + "/hooks/s3cr3t-path-token" }

func (r *receiver) setMode(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = m
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	id := req.Header.Get(webhooks.HeaderEventID)
	r.mu.Lock()
	mode := r.mode
	r.tries[id]++
	r.mu.Unlock()
	switch mode {
	case "500":
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
		return
	case "hang":
		time.Sleep(3 * time.Second) // past the sender's WEBHOOK_TIMEOUT
		w.WriteHeader(http.StatusOK)
		return
	case "drop":
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
	}
	problem := ""
	var e payments.Event
	switch {
	case err != nil:
		problem = "reading the body: " + err.Error()
	case req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json":
		problem = "method " + req.Method + ", content type " + req.Header.Get("Content-Type")
	case webhooks.Verify(r.secret, req.Header.Get(webhooks.HeaderSignature), body, time.Now(), 5*time.Minute) != nil:
		problem = "bad signature on " + id
	case json.Unmarshal(body, &e) != nil:
		problem = "body does not decode: " + string(body)
	case e.EventID != id:
		problem = "header id " + id + " for body id " + e.EventID
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if problem != "" {
		r.bad = append(r.bad, problem)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if prev, ok := r.got[id]; ok {
		a, _ := json.Marshal(prev)
		b, _ := json.Marshal(e)
		if !bytes.Equal(a, b) {
			r.bad = append(r.bad, "event "+id+" delivered with two bodies: "+string(a)+" and "+string(b))
		}
	}
	r.got[id] = e
	w.WriteHeader(http.StatusNoContent)
}

// missing returns the ids of evs not yet accepted.
func (r *receiver) missing(ids []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := r.got[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// problems returns what failed verification.
func (r *receiver) problems() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}
