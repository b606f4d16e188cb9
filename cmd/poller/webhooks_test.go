package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/internal/pgtest"
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
