package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give    string
		want    []int
		wantErr bool
	}{
		{"1,2,4,8", []int{1, 2, 4, 8}, false},
		{"3", []int{3}, false},
		{" 1, 2 ", []int{1, 2}, false},
		{"0", nil, true},
		{"1,x", nil, true},
		{"", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			t.Parallel()
			got, err := parseCounts(tt.give)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("parseCounts(%q) = %v, %v; want %v (error %v)", tt.give, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSequential(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b float64
		want float64
	}{
		{"equal rates halve", 10_000, 10_000, 5_000},
		{"logs and receipts", 20_000, 30_000, 12_000},
		{"unknown rate", 0, 10_000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sequential(tt.a, tt.b); math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("sequential(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// TestEventRows: one confirmed event per payment, numbered from 1, with
// the event id receivers deduplicate on.
func TestEventRows(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0).UTC()
	rows := [][]any{{int64(1337), "0xc0", "0xaa", int32(3), int64(12), "0xbb", "0xdd", "0xee", "5", at}}
	got := eventRows(rows)
	want := []any{int64(1), "1337:0xaa:3:confirmed:0xbb", "confirmed", int64(1337), "0xc0", "0xaa", int32(3), int64(12), "0xbb",
		"0xdd", "0xee", "5", at, int64(1)}
	if len(got) != 1 || !slices.Equal(got[0], want) {
		t.Fatalf("eventRows = %v, want [%v]", got, want)
	}
	if len(eventCols) != len(want) {
		t.Fatalf("%d columns for rows of %d values", len(eventCols), len(want))
	}
}

// TestRawReceipts: the receipts ceiling asks every block once, in
// requests of the batch size, and fails on a block the node has no
// receipts for.
func TestRawReceipts(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		asked    []string
		requests int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		type call struct {
			ID     int      `json:"id"`
			Method string   `json:"method"`
			Params []string `json:"params"`
		}
		var calls []call
		batch := strings.HasPrefix(string(body), "[")
		if batch {
			_ = json.Unmarshal(body, &calls)
		} else {
			var c call
			_ = json.Unmarshal(body, &c)
			calls = []call{c}
		}
		var out []map[string]any
		for _, c := range calls {
			if c.Params[0] == "0x63" {
				out = append(out, map[string]any{"jsonrpc": "2.0", "id": c.ID, "result": nil})
				continue
			}
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": c.ID, "result": []any{map[string]any{"status": "0x1"}}})
		}
		mu.Lock()
		requests++
		for _, c := range calls {
			asked = append(asked, c.Params[0])
		}
		mu.Unlock()
		if batch {
			_ = json.NewEncoder(w).Encode(out)
		} else {
			_ = json.NewEncoder(w).Encode(out[0])
		}
	}))
	defer srv.Close()
	r, err := rawReceipts(context.Background(), srv.URL, []uint64{1, 2, 3, 4, 5}, 2000, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if r.Calls != 3 || requests != 3 || !slices.Equal(asked, []string{"0x1", "0x2", "0x3", "0x4", "0x5"}) || r.Items != 2000 {
		t.Fatalf("rate %+v, %d requests asking %v", r, requests, asked)
	}
	if _, err := rawReceipts(context.Background(), srv.URL, []uint64{98, 99}, 2, 1, 1); err == nil {
		t.Fatal("a block without receipts passed")
	}
}

// TestUnevenShape: the uneven chain's blocks of 100,000 burns are as issue
// 30 describes users' chains: 100 to 3,100 burns a block, a median of 300,
// and blocks of thousands among them.
func TestUnevenShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 30))
	var got []int
	for left := 100_000; left > 0; {
		n := min(unevenBlockTxs(rng, len(got))*unevenPerTx, left)
		got = append(got, n)
		left -= n
	}
	sorted := slices.Sorted(slices.Values(got))
	big := 0
	for _, n := range got {
		if n >= 2000 {
			big++
		}
	}
	if lo, med, hi := sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1]; lo != 100 || med != 300 || hi != 3100 || big < 5 {
		t.Fatalf("%d blocks: min %d, median %d, max %d burns, %d of 2,000 or more; want 100, 300, 3,100 and at least 5",
			len(got), lo, med, hi, big)
	}
}
