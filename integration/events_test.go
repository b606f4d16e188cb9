package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// printedEvents parses `poller events --json` output.
func printedEvents(t *testing.T, out string) []payments.Event {
	t.Helper()
	var evs []payments.Event
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, `{"seq":`) {
			continue
		}
		var e payments.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// TestEventsFollowPrintsEveryEventOnce runs `poller events --follow --json`
// beside a replica with a small MAX_BLOCK_RANGE, with forged notifications
// (NOTIFY needs no privilege), and a backfill of the whole range under
// another cursor (duplicates: no event). It prints exactly the table's
// events, in seq order from 1, each once, never a forged one, and stops on
// SIGINT with exit 0. `poller events --since N` then prints the rest and
// exits.
func TestEventsFollowPrintsEveryEventOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newFaultRun(t, 1)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)
	if out, code := runPoller(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate exited %d:\n%s", code, out)
	}
	follow := startProc(t, "events", env, "poller", "events", "--follow", "--json")
	waitFor(t, time.Minute, "events listening", func() bool { return pollerSessions(t, r.pool, `query ILIKE 'LISTEN %'`) > 0 })
	forge := func(payload string) {
		t.Helper()
		if _, err := r.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.EventsChannel, payload); err != nil {
			t.Fatal(err)
		}
	}
	forge(`{"seq":1000}`)
	forge(`not json`)

	r.startPoller("MAX_BLOCK_RANGE=3")
	r.caughtUp(2 * time.Minute)
	r.finish(time.Minute)
	if out, code := runPoller(t, env, "backfill", "--from", "0", "--to", fmt.Sprint(cursorBlock(t, r.pool))); code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	} else if s := summaryOf(t, out); s.Inserted != 0 || s.Duplicates != 36 {
		t.Fatalf("backfill summary = %+v, want 36 duplicates", s)
	}
	forge(`{"seq":1}`)
	table := readEvents(t, r.pool, 0)
	confirmed := 0
	for _, e := range table {
		if e.kind == payments.KindConfirmed {
			confirmed++
		}
	}
	if confirmed != 36 {
		t.Fatalf("%d confirmed events, want 36", confirmed)
	}
	waitFor(t, 30*time.Second, "every event printed", func() bool { return len(printedEvents(t, follow.out.String())) >= len(table) })
	follow.signal(syscall.SIGINT)
	if code := follow.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("events exited %d after SIGINT", code)
	}
	got := printedEvents(t, follow.out.String())
	if len(got) != len(table) {
		t.Fatalf("printed %d events, the table holds %d", len(got), len(table))
	}
	for i, e := range got {
		want := table[i]
		if e.Seq != int64(i+1) || e.EventID != want.id || e.Kind != want.kind || e.Amount.String() != want.row.Amount {
			t.Fatalf("printed event %d = %+v, the table's %+v", i, e, want)
		}
	}
	// Resuming from a seq prints exactly what follows it, then exits.
	half := int64(len(table) / 2)
	out, code := runPoller(t, env, "events", "--json", "--since", fmt.Sprint(half))
	if code != 0 {
		t.Fatalf("events --since exited %d:\n%s", code, out)
	}
	rest := printedEvents(t, out)
	if len(rest) != len(table)-int(half) || rest[0].Seq != half+1 || rest[len(rest)-1].Seq != int64(len(table)) {
		t.Fatalf("events --since %d printed %d events, want seqs %d..%d", half, len(rest), half+1, len(table))
	}
}
