// Command webhook-receiver is a minimal burnpoller webhook endpoint, for the
// demo and compose: it verifies each delivery's Burnpoller-Signature with
// WEBHOOK_SECRET, answers 204 (401 on a bad signature, 400 on a bad body,
// 413 on a body over 1 MiB), notes deliveries it has seen before by
// Burnpoller-Event-Id, and logs one JSON line per delivery. It is also the
// reference for a receiver: cap the body and the time to read it, verify
// the raw body, deduplicate on the event id, credit only "confirmed".
//
//	WEBHOOK_SECRET=... webhook-receiver [--addr :9000]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("webhook-receiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ":9000", "listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	secret := os.Getenv("WEBHOOK_SECRET")
	if secret == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "webhook-receiver: WEBHOOK_SECRET is required; usage: webhook-receiver [--addr :9000]")
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	srv := newServer(*addr, newHandler(secret, log), readTimeout)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("webhook receiver listening", slog.String("addr", *addr))
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serving", slog.Any("err", err))
		return 1
	}
	return 0
}

const (
	// maxBody is the largest delivery read; an event is about 700 bytes.
	maxBody = 1 << 20
	// readTimeout bounds reading a request, headers and body: a sender
	// that stalls in the body is cut off, since the body is read before
	// its signature can be checked.
	readTimeout = 10 * time.Second
)

// newServer serves h on addr, reading each request within readTimeout.
func newServer(addr string, h http.Handler, readTimeout time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: min(5*time.Second, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      2 * readTimeout,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// handler verifies and logs deliveries.
type handler struct {
	secret string
	log    *slog.Logger
	mu     sync.Mutex
	seen   map[string]bool
}

func newHandler(secret string, log *slog.Logger) *handler {
	return &handler{secret: secret, log: log, seen: map[string]bool{}}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// The body is capped before it is read: a longer one is refused
	// unread, by its Content-Length or once it passes the cap.
	if r.ContentLength > maxBody {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	if err := webhooks.Verify(h.secret, r.Header.Get(webhooks.HeaderSignature), body, time.Now(), 5*time.Minute); err != nil {
		h.log.Warn("rejected a delivery: bad signature", slog.Any("err", err))
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e payments.Event
	if err := json.Unmarshal(body, &e); err != nil || e.EventID != r.Header.Get(webhooks.HeaderEventID) {
		h.log.Warn("rejected a delivery: body does not match its event id")
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	again := h.seen[e.EventID]
	h.seen[e.EventID] = true
	h.mu.Unlock()
	h.log.Info("payment event", slog.Int64("seq", e.Seq), slog.String("kind", e.Kind), slog.String("event_id", e.EventID),
		slog.String("payer", e.Payer), slog.String("digest", e.Digest), slog.String("amount", e.Amount.String()),
		slog.Int64("block", e.BlockNumber), slog.Int64("payment_id", e.PaymentID), slog.Bool("duplicate", again))
	w.WriteHeader(http.StatusNoContent)
}
