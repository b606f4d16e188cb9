package poller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// backfill runs a backfill through a fresh writer.
func (h *harness) backfill(ctx context.Context, cfg poller.BackfillConfig) (poller.BackfillProgress, error) {
	return poller.Backfill(ctx, h.writer(), cfg)
}

// verifier returns a verifier of the harness's chain and ledger.
func (h *harness) verifier() *poller.Verifier {
	return poller.NewVerifier(h.store, h.node, h.wcfg.ChainID, h.wcfg.Contracts)
}

// burnsIn adds a burn every third block of [0, n) and returns those in [from, to].
func burnsIn(node *fakeChain, n, from, to uint64) []string {
	var in []chain.Burn
	for b := uint64(0); b < n; b += 3 {
		burn := node.addBurn(b, byte(b), uint(b%2), int64(b)+1)
		if b >= from && b <= to {
			in = append(in, burn)
		}
	}
	return expected(in...)
}

func TestBackfillRecordsExactlyItsRangeAndLeavesTheLiveCursor(t *testing.T) {
	t.Parallel()
	node := newFakeChain(200)
	want := burnsIn(node, 200, 10, 90)
	h := newHarness(t, node)
	if _, err := h.store.SeedCursor(context.Background(), h.lcfg.CursorID, 150, ""); err != nil {
		t.Fatal(err)
	}
	var reports []poller.BackfillProgress
	prog, err := h.backfill(context.Background(), poller.BackfillConfig{
		ID: "backfill:test:10-90", From: 10, To: 90, Chunk: 7,
		Progress: func(p poller.BackfillProgress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	if !prog.Complete || prog.Done != 81 || prog.Total != 81 || prog.Inserted != int64(len(want)) || prog.Duplicates != 0 {
		t.Fatalf("progress = %+v", prog)
	}
	if len(reports) != 12 { // 81 blocks in chunks of 7
		t.Fatalf("%d progress reports, want 12", len(reports))
	}
	if c := h.cursor(); c.Block != 150 {
		t.Fatalf("live cursor moved to %d", c.Block)
	}
	for _, r := range node.requested() {
		if r[1]-r[0]+1 > 7 || r[0] < 10 || r[1] > 90 {
			t.Fatalf("asked %v, outside the range or over the chunk", r)
		}
	}
}

// TestBackfillByDefaultBatchesRangesLikeTheLiveLoop: without --chunk a
// transaction records several MaxBlockRange ranges (the next one fetched
// while the current one is inserted), within the batch budget.
func TestBackfillByDefaultBatchesRangesLikeTheLiveLoop(t *testing.T) {
	t.Parallel()
	node := newFakeChain(200)
	want := burnsIn(node, 200, 0, 199)
	h := newHarness(t, node)
	var reports []poller.BackfillProgress
	prog, err := h.backfill(context.Background(), poller.BackfillConfig{
		ID: "backfill:test:0-199", From: 0, To: 199,
		Progress: func(p poller.BackfillProgress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	if !prog.Complete || prog.Done != 200 || prog.Inserted != int64(len(want)) || prog.Duplicates != 0 {
		t.Fatalf("progress = %+v", prog)
	}
	asked := node.requested()
	if len(asked) != 20 {
		t.Fatalf("asked %d ranges, want 20 of MaxBlockRange=10: %v", len(asked), asked)
	}
	for i, r := range asked {
		if r != [2]uint64{uint64(10 * i), uint64(10*i + 9)} {
			t.Fatalf("range %d asked %v", i, r)
		}
	}
	if len(reports) >= len(asked) {
		t.Fatalf("%d transactions for %d ranges: no transaction batched ranges", len(reports), len(asked))
	}
	if c := h.cursorOf("backfill:test:0-199"); c.Block != 199 {
		t.Fatalf("backfill cursor at %d, want 199", c.Block)
	}
}

func TestBackfillToTheFinalityTarget(t *testing.T) {
	t.Parallel()
	node := newFakeChain(40)
	want := burnsIn(node, 60, 0, 40)
	h := newHarness(t, node)
	prog, err := h.backfill(context.Background(), poller.BackfillConfig{ID: "b", From: 0, To: -1})
	if err != nil {
		t.Fatal(err)
	}
	if prog.To != 40 || !prog.Complete {
		t.Fatalf("progress = %+v", prog)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	// A range beyond the target is refused.
	if _, err := h.backfill(context.Background(), poller.BackfillConfig{ID: "c", From: 0, To: 41}); !errors.Is(err, poller.ErrNotFinal) {
		t.Fatalf("backfill beyond the target: %v, want ErrNotFinal", err)
	}
}

func TestBackfillInterruptedResumesWithoutGapOrDouble(t *testing.T) {
	t.Parallel()
	node := newFakeChain(100)
	want := burnsIn(node, 100, 0, 99)
	h := newHarness(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	node.hook = func(context.Context, uint64, uint64) {
		node.mu.Lock()
		n := len(node.ranges)
		node.mu.Unlock()
		if n == 4 {
			once.Do(cancel) // interrupted while the fourth chunk is in flight
		}
	}
	cfg := poller.BackfillConfig{ID: "backfill:test:0-99", From: 0, To: 99, Chunk: 10}
	prog, err := h.backfill(ctx, cfg)
	if !errors.Is(err, poller.ErrInterrupted) {
		t.Fatalf("Backfill = %v, want ErrInterrupted", err)
	}
	// The chunk in flight finished: four chunks committed, nothing more.
	if prog.Done != 40 || prog.Complete {
		t.Fatalf("progress after the interruption = %+v", prog)
	}
	node.hook = nil
	prog, err = h.backfill(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !prog.Resumed || prog.DoneBefore != 40 || prog.Duplicates != 0 || !prog.Complete {
		t.Fatalf("resumed progress = %+v", prog)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	// Each block was asked once over both runs.
	next := uint64(0)
	for _, r := range node.requested() {
		if r[0] != next {
			t.Fatalf("range %v asked; expected one from %d (%v)", r, next, node.requested())
		}
		next = r[1] + 1
	}

	// --restart goes over it again: everything a duplicate, nothing doubled.
	prog, err = h.backfill(context.Background(), poller.BackfillConfig{ID: cfg.ID, From: 0, To: 99, Chunk: 10, Restart: true})
	if err != nil {
		t.Fatal(err)
	}
	if prog.Resumed || prog.Inserted != 0 || prog.Duplicates != int64(len(want)) {
		t.Fatalf("restarted progress = %+v", prog)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger after restart has %d rows, want %d", len(got), len(want))
	}
}

func TestBackfillBesideTheLiveLoop(t *testing.T) {
	t.Parallel()
	node := newFakeChain(0)
	want := burnsIn(node, 300, 0, 299)
	h := newHarness(t, node)
	h.wcfg.MaxBlockRange = 5
	_, stop := h.start()
	node.setTarget(299)
	var cursors []int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-time.After(5 * time.Millisecond):
				if c, err := h.store.Cursor(context.Background(), h.lcfg.CursorID); err == nil {
					cursors = append(cursors, c.Block)
				}
			case <-h.t.Context().Done():
				return
			}
			if len(cursors) > 0 && cursors[len(cursors)-1] == 299 {
				return
			}
		}
	}()
	prog, err := h.backfill(context.Background(), poller.BackfillConfig{ID: "backfill:test:0-299", From: 0, To: 299, Chunk: 9})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	if !slices.IsSorted(cursors) {
		t.Fatalf("the live cursor went backwards: %v", cursors)
	}
	if prog.Inserted+prog.Duplicates != int64(len(want)) {
		t.Fatalf("backfill saw %d+%d payments, want %d", prog.Inserted, prog.Duplicates, len(want))
	}
}

func TestUntilCaughtUpReturns(t *testing.T) {
	t.Parallel()
	node := newFakeChain(25)
	want := burnsIn(node, 26, 0, 25)
	h := newHarness(t, node)
	h.lcfg.UntilCaughtUp = true
	done := make(chan error, 1)
	go func() { done <- h.loop().Run(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after catching up")
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	if c := h.cursor(); c.Block != 25 {
		t.Fatalf("cursor = %d, want 25", c.Block)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	node := newFakeChain(60)
	burnsIn(node, 60, 0, 60)
	h := newHarness(t, node)
	ctx := context.Background()
	if _, err := h.backfill(ctx, poller.BackfillConfig{ID: "b", From: 0, To: 60}); err != nil {
		t.Fatal(err)
	}
	rep, err := h.verifier().Verify(ctx, 0, 60, 13)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Clean() || rep.ChainBurns != 20 || rep.LedgerRows != 20 {
		t.Fatalf("clean ledger reported as %+v", rep)
	}

	// Damage the table, one discrepancy of each kind.
	b := func(n uint64) string { return node.burns[n][0].TxHash.Hex() }
	damage := []string{
		fmt.Sprintf(`DELETE FROM payments WHERE tx_hash = '%s'`, b(3)),
		fmt.Sprintf(`UPDATE payments SET amount = amount + 1 WHERE tx_hash = '%s'`, b(6)),
		fmt.Sprintf(`UPDATE payments SET payer = '0x%040d' WHERE tx_hash = '%s'`, 7, b(9)),
		fmt.Sprintf(`UPDATE payments SET digest = '0x%064d' WHERE tx_hash = '%s'`, 7, b(12)),
		fmt.Sprintf(`UPDATE payments SET block_hash = '0x%064d' WHERE tx_hash = '%s'`, 7, b(15)),
		// Filed under a block of a later chunk than its burn's, and of an
		// earlier one: each reported once, as mismatched.
		fmt.Sprintf(`UPDATE payments SET block_number = 59 WHERE tx_hash = '%s'`, b(18)),
		fmt.Sprintf(`UPDATE payments SET block_number = 2 WHERE tx_hash = '%s'`, b(45)),
		`INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		 VALUES (1337, '0x00000000000000000000000000000000000000b1', '0x` + fmt.Sprintf("%064d", 42) + `', 0, 30,
		         '0x` + fmt.Sprintf("%064d", 1) + `', '0x` + fmt.Sprintf("%040d", 1) + `', '0x` + fmt.Sprintf("%064d", 1) + `', 5, now())`,
	}
	for _, sql := range damage {
		if _, err := h.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rep, err = h.verifier().Verify(ctx, 0, 60, 13)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Clean() || rep.Missing != 1 || rep.Extra != 1 || rep.Mismatched != 6 || len(rep.Discrepancies) != 8 {
		t.Fatalf("report = missing %d extra %d mismatched %d (%d listed), want 1 1 6: %+v",
			rep.Missing, rep.Extra, rep.Mismatched, len(rep.Discrepancies), rep.Discrepancies)
	}
	fields := map[string]string{}
	for _, d := range rep.Discrepancies {
		if d.Kind == poller.Mismatched {
			fields[d.TxHash] = fmt.Sprint(d.Fields)
		}
	}
	for tx, want := range map[string]string{b(6): "[amount]", b(9): "[payer]", b(12): "[digest]", b(15): "[block_hash]", b(18): "[block_number]", b(45): "[block_number]"} {
		if fields[tx] != want {
			t.Errorf("payment %s mismatched on %s, want %s", tx, fields[tx], want)
		}
	}
}

// stalledTarget is a node whose finality target never comes until ctx ends.
type stalledTarget struct{ *fakeChain }

func (s stalledTarget) Target(ctx context.Context) (chain.Target, error) {
	<-ctx.Done()
	return chain.Target{}, ctx.Err()
}

// TestBackfillInterruptedBeforeItsFirstChunk: a signal while the backfill
// still reads the target is an interruption (the command exits 128 + the
// signal), not a failure.
func TestBackfillInterruptedBeforeItsFirstChunk(t *testing.T) {
	t.Parallel()
	h := newHarness(t, newFakeChain(20))
	w := poller.NewWriter(h.wcfg, h.store, stalledTarget{h.node}, nil, h.log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := poller.Backfill(ctx, w, poller.BackfillConfig{ID: "b", From: 0, To: 10})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, poller.ErrInterrupted) {
		t.Fatalf("Backfill = %v, want ErrInterrupted", err)
	}
}
