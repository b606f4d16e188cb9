package poller_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

// events returns every event as "seq kind tx/index@block/hash", in seq
// order, and checks that seqs run 1, 2, 3... without a gap.
func (h *harness) events() []string {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), 0, 10_000)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			h.t.Fatalf("event %d has seq %d", i+1, e.Seq)
		}
		out[i] = fmt.Sprintf("%d %s %s/%d@%d/%s", e.Seq, e.Kind, e.TxHash, e.LogIndex, e.BlockNumber, e.BlockHash)
	}
	return out
}

// pending returns pending_payments as "tx/index@block/hash", sorted.
func (h *harness) pending() []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(), `SELECT tx_hash, log_index, block_number, block_hash FROM pending_payments`)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			tx, hash string
			index    int
			block    int64
		)
		if err := rows.Scan(&tx, &index, &block, &hash); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%d@%d/%s", tx, index, block, hash))
	}
	slices.Sort(out)
	return out
}

// status reads payment_status for a burn: "status payment_id confirmations".
func (h *harness) status(b chain.Burn) string {
	h.t.Helper()
	var (
		status string
		id     *int64
		confs  *int64
	)
	err := h.pool.QueryRow(context.Background(), `SELECT status, payment_id, confirmations FROM payment_status
		WHERE chain_id = 1337 AND tx_hash = $1 AND log_index = $2`, b.TxHash.Hex(), b.LogIndex).Scan(&status, &id, &confs)
	if err != nil {
		h.t.Fatalf("payment_status of %s/%d: %v", b.TxHash.Hex(), b.LogIndex, err)
	}
	str := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return status + " " + str(id) + " " + str(confs)
}

func ev(seq int, kind string, b chain.Burn) string {
	return fmt.Sprintf("%d %s %s/%d@%d/%s", seq, kind, b.TxHash.Hex(), b.LogIndex, b.BlockNumber, b.BlockHash.Hex())
}

func pend(bs ...chain.Burn) []string {
	var out []string
	for _, b := range bs {
		out = append(out, fmt.Sprintf("%s/%d@%d/%s", b.TxHash.Hex(), b.LogIndex, b.BlockNumber, b.BlockHash.Hex()))
	}
	slices.Sort(out)
	return out
}

// advance records up to the node's target in one range transaction.
func advance(t *testing.T, w *poller.Writer, node *fakeChain, id string) poller.Totals {
	t.Helper()
	ctx := context.Background()
	target, _ := node.Target(ctx)
	// A transaction records the ranges that have arrived, so reaching the
	// target may take more than one, as in the loop: their totals add up.
	var sum poller.Totals
	for i := 0; ; i++ {
		res := advanceOnce(t, w, id, target.Block)
		if i == 0 {
			sum = res
			sum.Events = maps.Clone(res.Events)
		} else {
			if res.To < res.From {
				t.Fatalf("the cursor stopped at %d, short of the target %d", sum.To, target.Block)
			}
			sum.To = res.To
			sum.Logs += res.Logs
			sum.Rejected += res.Rejected
			sum.Inserted += res.Inserted
			sum.Duplicates += res.Duplicates
			sum.Recovered += res.Recovered
			sum.Rescanned = sum.Rescanned || res.Rescanned
			for k, n := range res.Events {
				if sum.Events == nil {
					sum.Events = map[string]int{}
				}
				sum.Events[k] += n
			}
		}
		if res.To < res.From || res.To >= target.Block {
			return sum
		}
	}
}

// advanceOnce runs one range transaction of w's cursor id towards block to.
func advanceOnce(t *testing.T, w *poller.Writer, id string, to int64) poller.Totals {
	t.Helper()
	ctx := context.Background()
	tx, err := w.Begin(ctx, ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Advance(ctx, to, time.Minute); err != nil {
		t.Fatal(err)
	}
	res, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// track runs head tracking passes until the window is read, as the loop
// does, and sums what they did: From of the first, To, Head and Pending of
// the last.
func track(t *testing.T, w *poller.Writer, id string) poller.HeadTotals {
	t.Helper()
	res, err := trackAll(w, id, 100)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func trackAll(w *poller.Writer, id string, maxBlocks int64) (poller.HeadTotals, error) {
	ctx := context.Background()
	var sum poller.HeadTotals
	for i := 0; ; i++ {
		res, err := w.TrackHead(ctx, ctx, id, maxBlocks)
		if err != nil {
			return sum, err
		}
		if i == 0 {
			sum.From = res.From
		}
		sum.To, sum.Head, sum.Pending = res.To, res.Head, res.Pending
		sum.Seen += res.Seen
		sum.Retracted += res.Retracted
		if !res.Behind {
			return sum, nil
		}
		if i > 100 {
			return sum, errors.New("head tracking never caught up")
		}
	}
}

// TestHeadTrackingFollowsTheChain walks burns through their lives on a
// chain that reorganises at the head: seen, moved to another block,
// dropped, confirmed; each step's events, pending rows and statuses exact.
func TestHeadTrackingFollowsTheChain(t *testing.T) {
	t.Parallel()
	node := newFakeChain(10)
	node.setHead(15)
	h := newHarness(t, node)
	w := h.writer()
	ctx := context.Background()
	const id = "life"
	if _, err := w.Seed(ctx, id, -1); err != nil {
		t.Fatal(err)
	}
	final := node.addBurn(5, 1, 0, 100)
	atHead := node.addBurn(12, 2, 0, 200)
	moved := node.addBurnTx(14, common.HexToHash("0x3333"), 3, 1, 300)
	gone := node.addBurnTx(16, common.HexToHash("0x4444"), 4, 0, 400)

	if got := advance(t, w, node, id); got.Inserted != 1 || got.Events[payments.KindConfirmed] != 1 {
		t.Fatalf("advance: %+v", got)
	}
	// Behind the target, head tracking waits for the ledger.
	node.setTarget(11)
	if _, err := w.TrackHead(ctx, ctx, id, 100); !errors.Is(err, poller.ErrHeadSkipped) {
		t.Fatalf("TrackHead behind the target = %v, want skipped", err)
	}
	node.setTarget(10)
	if got := track(t, w, id); got.Seen != 2 || got.Retracted != 0 || got.Pending != 2 || got.From != 11 || got.To != 15 {
		t.Fatalf("first pass: %+v", got)
	}
	want := []string{ev(1, "confirmed", final), ev(2, "seen", atHead), ev(3, "seen", moved)}
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if got := h.status(atHead); got != "seen - 4" {
		t.Fatalf("status of the burn at 12 with the head at 15: %q", got)
	}
	// A pass over an unchanged chain records nothing.
	if got := track(t, w, id); got.Seen+got.Retracted != 0 || got.Pending != 2 {
		t.Fatalf("unchanged pass: %+v", got)
	}

	// The chain replaces block 14 on: the burn moves to block 15.
	node.reorg(14)
	movedNew := node.addBurnTx(15, moved.TxHash, 3, 1, 300)
	if got := track(t, w, id); got.Seen != 1 || got.Retracted != 1 || got.Pending != 2 {
		t.Fatalf("pass after the reorg at 14: %+v", got)
	}
	want = append(want, ev(4, "retracted", moved), ev(5, "seen", movedNew))
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if got := h.pending(); !slices.Equal(got, pend(atHead, movedNew)) {
		t.Fatalf("pending %q", got)
	}

	// The chain replaces block 12 on without the burn of block 12; the
	// other is re-included at 15 again (a new block 15).
	node.reorg(12)
	movedAgain := node.addBurnTx(15, moved.TxHash, 3, 1, 300)
	node.setHead(16)
	gone = node.addBurnTx(16, gone.TxHash, 4, 0, 400)
	if got := track(t, w, id); got.Seen != 2 || got.Retracted != 2 || got.Pending != 2 {
		t.Fatalf("pass after the reorg at 12: %+v", got)
	}
	want = append(want, ev(6, "retracted", atHead), ev(7, "retracted", movedNew), ev(8, "seen", movedAgain), ev(9, "seen", gone))
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if got := h.status(atHead); got != "retracted - -" {
		t.Fatalf("status of the dropped burn: %q", got)
	}

	// Block 16 is replaced without its burn before head tracking looks
	// again, and the target passes it: the ledger's transaction retracts
	// it and confirms the other.
	node.reorg(16)
	node.setTarget(16)
	if got := advance(t, w, node, id); got.Inserted != 1 || got.Events[payments.KindConfirmed] != 1 || got.Events[payments.KindRetracted] != 1 {
		t.Fatalf("advance to 16: %+v", got)
	}
	want = append(want, ev(10, "retracted", gone), ev(11, "confirmed", movedAgain))
	if got := h.events(); !slices.Equal(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if got := h.pending(); len(got) != 0 {
		t.Fatalf("pending after the target passed them: %q", got)
	}
	if got := h.ledger(); !slices.Equal(got, expected(final, movedAgain)) {
		t.Fatalf("ledger %q", got)
	}
	var paymentID int64
	if err := h.pool.QueryRow(ctx, `SELECT id FROM payments WHERE tx_hash = $1`, moved.TxHash.Hex()).Scan(&paymentID); err != nil {
		t.Fatal(err)
	}
	if got, want := h.status(movedAgain), fmt.Sprintf("confirmed %d 2", paymentID); got != want {
		t.Fatalf("status of the confirmed burn: %q, want %q", got, want)
	}
	if got := h.status(gone); got != "retracted - -" {
		t.Fatalf("status of the burn dropped below the target: %q", got)
	}
	// At the target with nothing above it: no event, nothing pending.
	if got := track(t, w, id); got.Seen+got.Retracted+got.Pending != 0 {
		t.Fatalf("last pass: %+v", got)
	}
	if got := len(h.events()); got != 11 {
		t.Fatalf("%d events after the last pass", got)
	}
	for kind, n := range map[string]float64{"seen": 5, "retracted": 4, "confirmed": 2} {
		if got := testutil.ToFloat64(h.metrics.Events.WithLabelValues(kind)); got != n {
			t.Errorf("burnpoller_events_total{kind=%q} = %v, want %v", kind, got, n)
		}
	}
}

// TestHeadTrackingWindowIsCapped: burns above PENDING_MAX_BLOCKS over the
// target wait, and are not retracted for being out of the window; nor are
// burns above a head that dropped, or everything when the node is behind
// the cursor.
func TestHeadTrackingWindowIsCapped(t *testing.T) {
	t.Parallel()
	node := newFakeChain(10)
	node.setHead(40)
	h := newHarness(t, node)
	w := h.writer()
	ctx := context.Background()
	if _, err := w.Seed(ctx, "cap", 10); err != nil {
		t.Fatal(err)
	}
	near := node.addBurn(13, 1, 0, 1)
	far := node.addBurn(30, 2, 0, 2)
	res, err := trackAll(w, "cap", 100)
	if err != nil || res.Pending != 2 {
		t.Fatalf("wide pass: %+v, %v", res, err)
	}
	res, err = trackAll(w, "cap", 5)
	if err != nil || res.To != 15 || res.Retracted != 0 || res.Pending != 2 {
		t.Fatalf("narrow pass: %+v, %v", res, err)
	}
	if got := h.pending(); !slices.Equal(got, pend(near, far)) {
		t.Fatalf("pending %q", got)
	}
	node.target, node.head = 10, 20 // the head drops below the far burn
	res, err = trackAll(w, "cap", 100)
	if err != nil || res.To != 20 || res.Retracted != 0 || res.Pending != 2 {
		t.Fatalf("pass with the head at 20: %+v, %v", res, err)
	}
	node.target, node.head = 5, 5 // a node behind the cursor
	if _, err := trackAll(w, "cap", 100); !errors.Is(err, poller.ErrHeadSkipped) {
		t.Fatalf("pass through a node behind the cursor = %v, want skipped", err)
	}
	if got := h.pending(); !slices.Equal(got, pend(near, far)) || len(h.events()) != 2 {
		t.Fatalf("pending %q, %d events", got, len(h.events()))
	}
}

// TestHeadTrackingFailureNeverStopsTheLedger: with the head unreadable the
// ledger still records every final burn, the loop stays healthy, and the
// failure shows in the metrics; once the head answers, tracking resumes.
func TestHeadTrackingFailureNeverStopsTheLedger(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	node.setHead(8)
	node.headErr = errors.New("head unavailable")
	b1 := node.addBurn(3, 1, 0, 10)
	b2 := node.addBurn(7, 2, 0, 20)
	h := newHarness(t, node)
	h.lcfg.Pending, h.lcfg.PendingMaxBlocks = true, 100
	l := h.loop()
	l.Signals.HeadFailed.Init()
	l.Signals.HeadTracked.Init()
	stop := h.run(l)
	_ = l.Signals.HeadFailed.Wait(t, 10*time.Second)
	h.waitCursor(5)
	if err := l.Health(); err != nil {
		t.Fatalf("health with head tracking failing: %v", err)
	}
	if got := testutil.ToFloat64(h.metrics.HeadTrackingFails); got != 1 {
		t.Fatalf("burnpoller_head_tracking_failing = %v", got)
	}
	if got := h.ledger(); !slices.Equal(got, expected(b1)) {
		t.Fatalf("ledger %q", got)
	}
	node.mu.Lock()
	node.headErr = nil
	node.mu.Unlock()
	l.Signals.HeadTracked.WaitUntil(t, 10*time.Second, func(res poller.HeadTotals) bool { return res.Pending == 1 })
	if got := h.pending(); !slices.Equal(got, pend(b2)) {
		t.Fatalf("pending %q", got)
	}
	if got := testutil.ToFloat64(h.metrics.HeadTrackingFails); got != 0 {
		t.Fatalf("burnpoller_head_tracking_failing after recovery = %v", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestRangesWithoutPendingRowsLeaveThemAlone: a range transaction that
// finds no pending row of its contracts, under their writer lock, writes
// nothing to pending_payments for any of its ranges. Another session holds
// the table in SHARE mode, which a DELETE waits for and a read does not:
// the catch-up records every burn regardless. With a pending row, the same
// lock stops the writer at its first range, and once it is released the
// row is settled as before: the burn confirmed where it was seen.
func TestRangesWithoutPendingRowsLeaveThemAlone(t *testing.T) {
	t.Parallel()
	node := newFakeChain(10)
	node.setHead(10)
	h := newHarness(t, node)
	h.wcfg.MaxBlockRange = 2 // several ranges in the one transaction
	w := h.writer()
	ctx := context.Background()
	if _, err := w.Seed(ctx, "quiet", 0); err != nil {
		t.Fatal(err)
	}
	var burns []chain.Burn
	for b := uint64(1); b <= 10; b += 3 {
		burns = append(burns, node.addBurn(b, byte(b), 0, int64(100+b)))
	}
	share := func() func() {
		t.Helper()
		lock, err := h.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		release := func() { _ = lock.Rollback(ctx) }
		t.Cleanup(release) // before the pool closes, should the test stop first
		if _, err := lock.Exec(ctx, `LOCK TABLE pending_payments IN SHARE MODE`); err != nil {
			t.Fatal(err)
		}
		return release
	}
	release := share()
	res := advance(t, w, node, "quiet") // each transaction as many ranges as have arrived
	release()
	if res.To != 10 || res.Inserted != int64(len(burns)) {
		t.Fatalf("catch-up beside the lock: %+v", res)
	}
	if got, want := h.ledger(), expected(burns...); !slices.Equal(got, want) {
		t.Fatalf("ledger %q, want %q", got, want)
	}
	if c := h.cursorOf("quiet"); c.Block != 10 {
		t.Fatalf("cursor at %d, want 10", c.Block)
	}

	// A burn seen at the head is pending; the blocks that settle it wait
	// for the lock.
	node.setHead(14)
	seen := node.addBurn(12, 0x12, 0, 212)
	if got := track(t, w, "quiet"); got.Seen != 1 || got.Pending != 1 {
		t.Fatalf("head pass: %+v", got)
	}
	node.setTarget(14)
	release = share()
	tx, err := w.Begin(ctx, ctx, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Advance(ctx, 14, time.Minute)
	tx.Rollback()
	release()
	if !errors.Is(err, payments.ErrLockWait) || errors.Is(err, payments.ErrLockTimeout) {
		t.Fatalf("a range with a pending row, pending_payments locked: %v, want ErrLockWait, not the cursor's lock timeout", err)
	}
	if res := advance(t, w, node, "quiet"); res.To != 14 || res.Inserted != 1 || res.Events[payments.KindConfirmed] != 1 {
		t.Fatalf("catch-up after the lock: %+v", res)
	}
	if got := h.pending(); len(got) != 0 {
		t.Fatalf("pending %q after the burn was confirmed", got)
	}
	if got, want := h.ledger(), expected(append(burns, seen)...); !slices.Equal(got, want) {
		t.Fatalf("ledger %q, want %q", got, want)
	}
	evs := h.events()
	if want := ev(len(evs)-1, payments.KindSeen, seen); evs[len(evs)-2] != want {
		t.Fatalf("events %q, want %q before the last", evs, want)
	}
	if want := ev(len(evs), payments.KindConfirmed, seen); evs[len(evs)-1] != want {
		t.Fatalf("events %q, want %q last", evs, want)
	}
}
