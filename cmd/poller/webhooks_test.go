package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/webhooks"
)

func TestWebhooksCommands(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	t.Setenv("DATABASE_URL", dbURL)
	recordEvents(t, pool, 2)
	eps, err := webhooks.ParseEndpoints("https://hooks.example.com/in/TOKEN123")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO webhook_endpoints (endpoint, events, enqueued_seq) VALUES ($1, '{seen}', 0)`, eps[0].Label); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return out.String(), errOut.String(), code
	}
	out, _, code := cmd("webhooks", "status", "--json")
	var st []webhooks.EndpointStatus
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st) != 1 || st[0].Backlog != 2 || st[0].Endpoint != eps[0].Label {
		t.Fatalf("status --json: exit %d, %s", code, out)
	}
	if out, _, code = cmd("webhooks", "status"); code != 0 || !strings.Contains(out, eps[0].Label) || strings.Contains(out, "TOKEN123") {
		t.Fatalf("status: exit %d, %s", code, out)
	}
	if out, _, code = cmd("webhooks", "retry", "--seq", "2"); code != 0 || out != "event 2 armed for 1 endpoints\n" {
		t.Fatalf("retry --seq 2: exit %d, %q", code, out)
	}
	if out, _, code = cmd("webhooks", "retry", "--dead"); code != 0 || out != "re-armed 0 dead-lettered deliveries\n" {
		t.Fatalf("retry --dead: exit %d, %q", code, out)
	}
	if _, _, code = cmd("webhooks", "retry", "--seq", "99"); code != exitFailure {
		t.Fatalf("retry of a missing event exited %d", code)
	}
	for _, bad := range [][]string{{"webhooks"}, {"webhooks", "purge"}, {"webhooks", "retry"}, {"webhooks", "retry", "--dead", "--seq", "1"}, {"webhooks", "status", "x"}} {
		if _, _, code := cmd(bad...); code != exitUsage {
			t.Errorf("%v exited %d, want %d", bad, code, exitUsage)
		}
	}
}

// TestWebhooksStatusShowsTheLastErrorWithoutSecrets: an endpoint whose
// host does not resolve, its token a host label: `poller webhooks status`
// shows its deliveries' last error, a DNS failure naming the endpoint by
// its label, and none of the URL's secrets (the host's token, the path's,
// the query's bare key, user info).
func TestWebhooksStatusShowsTheLastErrorWithoutSecrets(t *testing.T) {
	pool, dbURL := pgtest.NewPool(t)
	t.Setenv("DATABASE_URL", dbURL)
	const raw = "https://hook:hookpass99@secrettoken123.invalid/in/Path-Token-42?Zx81kQ0pLmN2vB7c"
	eps, err := webhooks.ParseEndpoints(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := webhooks.New(webhooks.Config{Endpoints: eps, Secret: "whsec_test_0123456789", Events: payments.Kinds,
		Timeout: 5 * time.Second, MaxAge: 24 * time.Hour, Poll: 20 * time.Millisecond,
		Backoff: func(int) time.Duration { return time.Hour }}, pool, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	d.Signals.Attempted.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if err := d.Register(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); _ = d.Run(ctx) }()
	recordEvents(t, pool, 1)
	a := d.Signals.Attempted.Wait(t, time.Minute)
	cancel()
	<-done
	want := "POST " + eps[0].Label + ": dns: "
	if !strings.HasPrefix(a.Err, want) {
		t.Fatalf("attempt %+v, want a DNS failure", a)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"webhooks", "status"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d, %s", code, errOut.String())
	}
	text := out.String()
	out.Reset()
	if code := run([]string{"webhooks", "status", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("status --json: exit %d, %s", code, errOut.String())
	}
	var st []webhooks.EndpointStatus
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st) != 1 || st[0].LastError != a.Err {
		t.Fatalf("status --json: %v, %s", err, out.String())
	}
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[1], a.Err) || !strings.Contains(lines[0], "LAST ERROR") {
		t.Fatalf("status, want the last error in the endpoint's row:\n%s", text)
	}
	for _, secret := range []string{"secrettoken123", "hookpass99", "Path-Token-42", "Zx81kQ0pLmN2vB7c"} {
		if strings.Contains(text+out.String()+errOut.String(), secret) {
			t.Errorf("status shows %q:\n%s\n%s", secret, text, out.String())
		}
	}
}
