package integration

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
)

// eventRow is one payment_events row as the audit needs it.
type eventRow struct {
	seq       int64
	id, kind  string
	row       ledgerRow
	paymentID int64
}

func readEvents(t *testing.T, pool *pgxpool.Pool, after int64) []eventRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT seq, event_id, kind, tx_hash, log_index, block_number, block_hash,
		payer, digest, amount::text, coalesce(payment_id, 0) FROM payment_events WHERE seq > $1 ORDER BY seq`, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var (
			e     eventRow
			idx   int32
			block int64
		)
		if err := rows.Scan(&e.seq, &e.id, &e.kind, &e.row.TxHash, &idx, &block, &e.row.BlockHash, &e.row.Payer,
			&e.row.Digest, &e.row.Amount, &e.paymentID); err != nil {
			t.Fatal(err)
		}
		e.row.LogIndex, e.row.BlockNumber = uint(idx), uint64(block)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// position is a burn at one block: what an event id names, kind aside.
func position(r ledgerRow) string { return fmt.Sprintf("%s/%d@%s", r.TxHash, r.LogIndex, r.BlockHash) }

// auditEvents checks the event log against the ledger: seqs 1..N without a
// gap; exactly one confirmed event per payment, naming it, at its position;
// no confirmed event without its payment; every retracted position seen (or
// confirmed) before, and never confirmed after; every event id well formed.
func auditEvents(t *testing.T, pool *pgxpool.Pool, chainID uint64) []eventRow {
	t.Helper()
	evs := readEvents(t, pool, 0)
	ids := map[int64]ledgerRow{}
	rows, err := pool.Query(context.Background(), `SELECT id, tx_hash, log_index, block_number, block_hash, payer, digest, amount::text FROM payments`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id    int64
			r     ledgerRow
			idx   int32
			block int64
		)
		if err := rows.Scan(&id, &r.TxHash, &idx, &block, &r.BlockHash, &r.Payer, &r.Digest, &r.Amount); err != nil {
			t.Fatal(err)
		}
		r.LogIndex, r.BlockNumber = uint(idx), uint64(block)
		ids[id] = r
	}
	rows.Close()
	confirmed := map[int64]bool{}
	state := map[string]string{} // position -> last kind
	occurrences := map[string]int{}
	for i, e := range evs {
		if e.seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a gap", i+1, e.seq)
		}
		// The n-th occurrence of a step at a position is <id>:<n>.
		base := payments.EventID(chainID, e.row.TxHash, uint32(e.row.LogIndex), e.kind, e.row.BlockHash)
		occurrences[base]++
		want := base
		if n := occurrences[base]; n > 1 {
			want = fmt.Sprintf("%s:%d", base, n)
		}
		if e.id != want {
			t.Fatalf("event %d id %q, want %q", e.seq, e.id, want)
		}
		pos := position(e.row)
		switch e.kind {
		case payments.KindConfirmed:
			p, ok := ids[e.paymentID]
			if !ok || p != e.row {
				t.Fatalf("confirmed event %d names payment %d (%v), which the ledger holds as %v", e.seq, e.paymentID, e.row, p)
			}
			if confirmed[e.paymentID] {
				t.Fatalf("payment %d confirmed twice", e.paymentID)
			}
			confirmed[e.paymentID] = true
		case payments.KindRetracted:
			if last := state[pos]; last != payments.KindSeen && last != payments.KindConfirmed {
				t.Fatalf("event %d retracts %s, last %q", e.seq, pos, last)
			}
		case payments.KindSeen:
			if state[pos] == payments.KindConfirmed {
				t.Fatalf("event %d sees %s after it was confirmed", e.seq, pos)
			}
		}
		// Confirmed again after its retraction only as a new occurrence
		// (credited again after an orphaning).
		if state[pos] == payments.KindRetracted && e.kind == payments.KindConfirmed && occurrences[base] == 1 {
			t.Fatalf("event %d confirms %s after its retraction", e.seq, pos)
		}
		state[pos] = e.kind
	}
	for id, p := range ids {
		if !confirmed[id] {
			t.Fatalf("payment %d (%v) has no confirmed event", id, p)
		}
	}
	return evs
}

// pendingRows reads pending_payments.
func pendingRows(t *testing.T, pool *pgxpool.Pool) []ledgerRow {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT tx_hash, log_index, block_number, block_hash, payer, digest, amount::text FROM pending_payments`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var (
			r     ledgerRow
			idx   int32
			block int64
		)
		if err := rows.Scan(&r.TxHash, &idx, &block, &r.BlockHash, &r.Payer, &r.Digest, &r.Amount); err != nil {
			t.Fatal(err)
		}
		r.LogIndex, r.BlockNumber = uint(idx), uint64(block)
		out = append(out, r)
	}
	sortRows(out)
	return out
}

func trackedHead(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(max(block_number), -1) FROM chain_heads`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHeadReorgsGiveExactLifecycle: the live poller tracks the head of a
// dev chain that reorganises above the finalized block. Burns of the
// dropped branch are seen and then retracted, never confirmed nor in the
// ledger; every burn of the canonical chain up to the cursor is confirmed
// once; pending_payments ends equal to the chain above the cursor.
func TestHeadReorgsGiveExactLifecycle(t *testing.T) {
	rc := startReorgChain(t)
	info := rc.c.Info()
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=50ms"), "poller")

	rc.burnUntil(104)
	head := rc.pauseAt(104)
	final := int64((head - 1) / 32 * 32)
	waitFor(t, time.Minute, "the head tracked", func() bool {
		return cursorBlock(t, pool) == final && trackedHead(t, pool) == int64(head)
	})
	above := diffRows(chainBurns(t, info.RPCURL, info.BurnContract, head), chainBurns(t, info.RPCURL, info.BurnContract, uint64(final)))
	if got := pendingRows(t, pool); !slices.Equal(got, above) {
		t.Fatalf("pending before the reorg: %v\nwant %v", got, above)
	}
	// The branch above final+2 is dropped with its transactions.
	orphaned := diffRows(above, chainBurns(t, info.RPCURL, info.BurnContract, uint64(final)+2))
	if len(orphaned) == 0 {
		t.Fatal("no burns above the fork point; the test would prove nothing")
	}
	rc.forkAt(uint64(final) + 2)
	rc.burnUntil(uint64(final) + 70)
	head = rc.pauseAt(uint64(final) + 70)
	final = int64((head - 1) / 32 * 32)
	waitFor(t, time.Minute, "the head tracked after the reorg", func() bool {
		return cursorBlock(t, pool) == final && trackedHead(t, pool) == int64(head)
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(final))
	above = diffRows(chainBurns(t, info.RPCURL, info.BurnContract, head), chainBurns(t, info.RPCURL, info.BurnContract, uint64(final)))
	if got := pendingRows(t, pool); !slices.Equal(got, above) {
		t.Fatalf("pending after the reorg: %v\nwant %v", got, above)
	}
	evs := auditEvents(t, pool, info.ChainID)
	last := map[string]string{}
	for _, e := range evs {
		last[position(e.row)] = e.kind
	}
	for _, o := range orphaned {
		if got := last[position(o)]; got != payments.KindRetracted {
			t.Errorf("burn %v of the dropped branch: last event %q, want retracted", o, got)
		}
		var status string
		if err := pool.QueryRow(context.Background(), `SELECT status FROM payment_status WHERE tx_hash = $1 AND log_index = $2`,
			o.TxHash, int(o.LogIndex)).Scan(&status); err != nil || status != "retracted" {
			t.Errorf("payment_status of %v = %q (%v), want retracted", o, status, err)
		}
	}
	for _, r := range above {
		if got := last[position(r)]; got != payments.KindSeen {
			t.Errorf("pending burn %v: last event %q, want seen", r, got)
		}
	}
}

// TestEventsAreGapFreeUnderConcurrentWriters: the live loop (with head
// tracking) and a backfill of an overlapping range record at once, while a
// reader repeats "seq > last ORDER BY seq": it never sees a gap, reads every
// committed event exactly once, and the events match the ledger.
func TestEventsAreGapFreeUnderConcurrentWriters(t *testing.T) {
	rc := startReorgChain(t)
	info := rc.c.Info()
	pool, dbURL := pgtest.NewPool(t)

	var (
		mu   sync.Mutex
		read []eventRow
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		var last int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, e := range readEvents(t, pool, last) {
				if e.seq != last+1 {
					t.Errorf("reader saw seq %d right after %d", e.seq, last)
					return
				}
				last = e.seq
				mu.Lock()
				read = append(read, e)
				mu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// The live loop starts at block 100 while the chain is at 190 (final
	// 160) and burns go on; three backfills record [0, 150] meanwhile.
	rc.burnUntil(190)
	live := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, freeAddr(t), "POLL_INTERVAL=50ms", "START_BLOCK=100", "MAX_BLOCK_RANGE=4"), "poller")
	burning, burnsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(burnsDone)
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-burning:
				return
			case <-time.After(40 * time.Millisecond):
			}
			if _, err := rc.c.Burn(ctx, i%rc.c.Payers(), devchain.RandomAmount(), devchain.RandomDigest()); err != nil {
				t.Errorf("burn: %v", err)
				return
			}
		}
	}()
	for range 3 {
		out, code := runPoller(t, pollerEnv(dbURL, info.RPCURL, info, freeAddr(t), "CURSOR_ID=side", "MAX_BLOCK_RANGE=3"),
			"backfill", "--from", "0", "--to", "150", "--restart", "--chunk", "3")
		if code != 0 {
			t.Fatalf("backfill exited %d:\n%s", code, out)
		}
	}
	close(burning)
	<-burnsDone
	head := rc.pauseAt(rc.head())
	final := int64((head - 1) / 32 * 32)
	waitFor(t, time.Minute, "the live cursor at the finalized block", func() bool { return cursorBlock(t, pool) == final })
	live.signal(syscall.SIGTERM)
	if code := live.wait(t, time.Minute); code != 0 {
		t.Fatalf("live poller exit %d", code)
	}
	close(stop)
	<-done
	if t.Failed() {
		return
	}
	all := auditEvents(t, pool, info.ChainID)
	mu.Lock()
	defer mu.Unlock()
	// What the reader did not get before it stopped, it gets now.
	read = append(read, all[len(read):]...)
	seen := map[string]bool{}
	for i, e := range read {
		if e.seq != all[i].seq || e.id != all[i].id {
			t.Fatalf("reader's event %d is %d %s, the table's %d %s", i, e.seq, e.id, all[i].seq, all[i].id)
		}
		if seen[e.id] {
			t.Fatalf("event %s read twice", e.id)
		}
		seen[e.id] = true
	}
	rows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(final))
	kinds := map[string]int{}
	for _, e := range all {
		kinds[e.kind]++
	}
	if kinds[payments.KindConfirmed] != len(rows) || kinds[payments.KindSeen] == 0 {
		t.Fatalf("%v events for %d payments: want one confirmed each, and burns seen at the head", kinds, len(rows))
	}
}
