package main

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
)

// finalityClock notes when each block comes within the finality target: the
// start of its head-to-row latency.
type finalityClock struct {
	mu      sync.Mutex
	finalAt map[uint64]time.Time
	last    uint64
}

// watch polls the node's finalized block every 2 ms until ctx is done.
func (f *finalityClock) watch(ctx context.Context, cl *chain.Client) {
	for ctx.Err() == nil {
		h, err := cl.HeaderByTag(ctx, "finalized")
		if err == nil {
			now := time.Now()
			f.mu.Lock()
			if f.finalAt == nil {
				f.finalAt = map[uint64]time.Time{}
			}
			for b := f.last + 1; b <= h.Number; b++ {
				f.finalAt[b] = now
			}
			f.last = max(f.last, h.Number)
			f.mu.Unlock()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// arrival is a payment of block as its transaction's notification arrived.
type arrival struct {
	block int64
	at    time.Time
}

// arrivals collects payments as they commit: the end of their head-to-row
// latency.
type arrivals struct {
	mu   sync.Mutex
	seen []arrival
}

// listen waits for notifications on listen (which has run LISTEN
// burnpoller_payments) until ctx is done, noting each payment's block; for
// a large transaction, which names its id range only, it reads the blocks
// with reader.
func (a *arrivals) listen(ctx context.Context, listen, reader *pgx.Conn) {
	for {
		n, err := listen.WaitForNotification(ctx)
		if err != nil {
			return
		}
		at := time.Now()
		var note struct {
			Payments []struct {
				Block int64 `json:"block_number"`
			} `json:"payments"`
			FirstID int64 `json:"first_id"`
			LastID  int64 `json:"last_id"`
		}
		if json.Unmarshal([]byte(n.Payload), &note) != nil {
			continue
		}
		blocks := make([]int64, 0, len(note.Payments))
		for _, p := range note.Payments {
			blocks = append(blocks, p.Block)
		}
		if len(blocks) == 0 {
			rows, err := reader.Query(ctx, `SELECT block_number FROM payments WHERE id BETWEEN $1 AND $2`, note.FirstID, note.LastID)
			if err != nil {
				continue
			}
			for rows.Next() {
				var b int64
				if rows.Scan(&b) == nil {
					blocks = append(blocks, b)
				}
			}
			rows.Close()
		}
		a.mu.Lock()
		for _, b := range blocks {
			a.seen = append(a.seen, arrival{b, at})
		}
		a.mu.Unlock()
	}
}

// headToRow fills st's payment count and latency percentiles from the
// arrivals whose block the clock saw come within the finality target.
func headToRow(st *Steady, f *finalityClock, a *arrivals) {
	var lat []float64
	f.mu.Lock()
	a.mu.Lock()
	for _, p := range a.seen {
		if at, ok := f.finalAt[uint64(p.block)]; ok {
			lat = append(lat, float64(p.at.Sub(at).Microseconds())/1000)
		}
	}
	st.Payments = len(a.seen)
	a.mu.Unlock()
	f.mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		st.LatencyP50Ms = lat[len(lat)/2]
		st.LatencyP99Ms = lat[len(lat)*99/100]
		st.LatencyMaxMs = lat[len(lat)-1]
	}
}
