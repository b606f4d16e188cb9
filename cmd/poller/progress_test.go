package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/poller"
)

// TestBackfillProgressLogLine: without a terminal, progress is one log line
// every progressEvery with done/total, logs, inserted, duplicates, blocks/s
// and ETA; updates in between print nothing.
func TestBackfillProgressLogLine(t *testing.T) {
	var logs bytes.Buffer
	r := newReporter(&bytes.Buffer{}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if r.tty {
		t.Fatal("a buffer taken for a terminal")
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now, r.last = func() time.Time { return clock }, clock
	p := poller.BackfillProgress{Done: 250, Total: 1000, Logs: 40, Inserted: 30, Duplicates: 10, Elapsed: 5, DoneBefore: 50}
	for _, step := range []struct {
		advance time.Duration
		want    int // lines so far
	}{
		{0, 0},                               // at the start
		{progressEvery - time.Nanosecond, 0}, // just too soon
		{time.Nanosecond, 1},                 // progressEvery after the start
		{progressEvery / 2, 1},               // too soon after that line
		{progressEvery / 2, 2},               // progressEvery after it
	} {
		clock = clock.Add(step.advance)
		r.update(p)
		if n := strings.Count(logs.String(), "\n"); n != step.want {
			t.Fatalf("after +%s: %d lines, want %d", step.advance, n, step.want)
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var got struct {
		Msg        string  `json:"msg"`
		Done       int64   `json:"blocks_done"`
		Total      int64   `json:"blocks_total"`
		Logs       int64   `json:"logs"`
		Inserted   int64   `json:"inserted"`
		Duplicates int64   `json:"duplicates"`
		Rate       float64 `json:"blocks_per_second"`
		ETA        int64   `json:"eta"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	// 200 blocks in this run's 5 s: 40 blocks/s; 750 left: 19 s (rounded).
	if got.Msg != "backfill progress" || got.Done != 250 || got.Total != 1000 || got.Logs != 40 || got.Inserted != 30 ||
		got.Duplicates != 10 || got.Rate != 40 || time.Duration(got.ETA) != 19*time.Second {
		t.Fatalf("progress line = %+v", got)
	}
}

// TestBackfillProgressBar: on a terminal every update redraws one bar.
func TestBackfillProgressBar(t *testing.T) {
	var out, logs bytes.Buffer
	r := newReporter(&out, slog.New(slog.NewJSONHandler(&logs, nil)))
	r.tty = true
	r.update(poller.BackfillProgress{Done: 500, Total: 1000, Logs: 7, Inserted: 5, Duplicates: 2, Elapsed: 10})
	r.finish(poller.BackfillProgress{Done: 1000, Total: 1000, Logs: 9, Inserted: 7, Duplicates: 2, Elapsed: 20})
	want := "\r[" + strings.Repeat("=", 15) + strings.Repeat(" ", 15) + "] 500/1000 blocks  7 logs  5 new  2 dup  50 blocks/s  ETA 10s   " +
		"\r[" + strings.Repeat("=", 30) + "] 1000/1000 blocks  9 logs  7 new  2 dup  50 blocks/s  ETA 0s   \n"
	if out.String() != want {
		t.Fatalf("bar output\n%q\nwant\n%q", out.String(), want)
	}
	if logs.Len() != 0 {
		t.Fatalf("log lines beside the bar: %s", logs.String())
	}
}
