package poller_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/poller"
)

// hookSchema is the application side of the test's PAYMENT_HOOK_SQL: a
// balance per payer, a log of every credit, and a switch the test flips to
// make the hook fail for one payer. The two sequences count hook calls and
// failures; sequences are not transactional, so they count the calls made in
// transactions that were rolled back too.
const hookSchema = `
CREATE TABLE credits (payer text PRIMARY KEY, amount numeric NOT NULL);
CREATE TABLE credit_log (payment_id bigint NOT NULL, payer text NOT NULL, amount numeric NOT NULL);
CREATE TABLE hook_switch (failing_payer text NOT NULL);
CREATE SEQUENCE hook_calls;
CREATE SEQUENCE hook_failures;
CREATE FUNCTION credit(p_id bigint, p_payer text, p_amount numeric) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM nextval('hook_calls');
	IF EXISTS (SELECT 1 FROM hook_switch WHERE failing_payer = p_payer) THEN
		PERFORM nextval('hook_failures');
		RAISE EXCEPTION 'hook failing on purpose for %', p_payer;
	END IF;
	INSERT INTO credit_log VALUES (p_id, p_payer, p_amount);
	INSERT INTO credits VALUES (p_payer, p_amount)
		ON CONFLICT (payer) DO UPDATE SET amount = credits.amount + EXCLUDED.amount;
END $$;`

// TestFailingHookRollsBackTheRangeAndRetriesUntilItCredits: while
// PAYMENT_HOOK_SQL fails for one payment, every transaction that would record
// it rolls back whole — the payments, the cursor and the credits the hook had
// already made for other payments in it — and the same range is retried,
// never skipped. Once the hook succeeds, every payment is recorded and
// credited exactly once, and later rescans of the committed blocks, which
// find only duplicates, credit nothing more.
func TestFailingHookRollsBackTheRangeAndRetriesUntilItCredits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(25)
	// Payer 3's first burn comes after payer 1's in the first range, so in
	// each failing transaction the hook credits payer 1 and then fails.
	burns := []chain.Burn{
		node.addBurn(1, 1, 0, 5),
		node.addBurn(3, 3, 0, 9_000_000_000_000_000_000),
		node.addBurn(12, 1, 0, 7),
		node.addBurn(12, 1, 1, 11), // a second burn in the same transaction
		node.addBurn(14, 2, 0, 999_999_999_999_999_999),
		node.addBurn(22, 3, 0, 9_000_000_000_000_000_001), // payer 3's total exceeds int64
		node.addBurn(25, 2, 3, 1),
	}
	node.addBurn(26, 1, 2, 1000) // beyond the target: neither recorded nor credited
	want := expected(burns...)
	wantCredits := map[string]*big.Int{}
	for _, b := range burns {
		payer := strings.ToLower(b.Payer.Hex())
		if wantCredits[payer] == nil {
			wantCredits[payer] = new(big.Int)
		}
		wantCredits[payer].Add(wantCredits[payer], b.Amount)
	}
	failingPayer := strings.ToLower(burns[1].Payer.Hex())

	h := newHarness(t, node)
	h.lcfg.RescanDepth = 100 // every rescan re-reads all committed blocks
	h.lcfg.RescanInterval = time.Millisecond
	if _, err := h.pool.Exec(ctx, hookSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, `INSERT INTO hook_switch VALUES ($1)`, failingPayer); err != nil {
		t.Fatal(err)
	}
	// $1 id, $8 payer, $10 amount (payments.Hook).
	hook, err := h.store.PrepareHook(ctx, `SELECT credit($1, $8, $10)`)
	if err != nil {
		t.Fatal(err)
	}
	h.wcfg.Hook = hook

	count := func(query string) int64 {
		t.Helper()
		var n int64
		if err := h.pool.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const (
		failuresQuery = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM hook_failures`
		callsQuery    = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM hook_calls`
	)
	errorPolls := func() float64 { return testutil.ToFloat64(h.metrics.Polls.WithLabelValues(poller.ResultError)) }

	_, stop := h.start()

	// Failing phase: the hook fails again and again; nothing is committed.
	waitFor(t, 10*time.Second, "three failed hook runs and error polls", func() bool {
		// The cursor row appears once Run has seeded it, at -1; it must stay there.
		if c, err := h.store.Cursor(ctx, h.lcfg.CursorID); err == nil && c.Block != -1 {
			t.Fatalf("cursor moved to %d while the hook failed", c.Block)
		}
		return count(failuresQuery) >= 3 && errorPolls() >= 3
	})
	failures := count(failuresQuery)
	if calls := count(callsQuery); calls < 2*failures {
		t.Fatalf("%d hook calls for %d failures: payer 1 was not credited before each failure", calls, failures)
	}
	if c := h.cursor(); c.Block != -1 {
		t.Fatalf("cursor moved to %d while the hook failed", c.Block)
	}
	if got := h.ledger(); len(got) != 0 {
		t.Fatalf("payments committed while the hook failed: %v", got)
	}
	if n := count(`SELECT count(*) FROM credits`) + count(`SELECT count(*) FROM credit_log`); n != 0 {
		t.Fatalf("%d credit rows committed while the hook failed (payer 1's credits must roll back)", n)
	}
	if n := testutil.ToFloat64(h.metrics.Polls.WithLabelValues(poller.ResultCommitted)); n != 0 {
		t.Fatalf("committed polls = %v while the hook failed", n)
	}
	if n := testutil.ToFloat64(h.metrics.PaymentsInserted); n != 0 {
		t.Fatalf("inserted metric = %v while the hook failed", n)
	}
	// Each retry starts over at block 0; the only other range asked is
	// [10, 19], fetched ahead while [0, 9] was being recorded.
	failingAsks := node.requested()
	for i, r := range failingAsks {
		if r != [2]uint64{0, 9} && (i == 0 || failingAsks[i-1] != [2]uint64{0, 9} || r != [2]uint64{10, 19}) {
			t.Fatalf("range %v asked while the hook failed (ranges %v)", r, failingAsks)
		}
	}

	// The hook recovers: the range is recorded and credited.
	if _, err := h.pool.Exec(ctx, `DELETE FROM hook_switch`); err != nil {
		t.Fatal(err)
	}
	h.waitCursor(25)
	// Rescans re-read every committed block and find only duplicates.
	waitFor(t, 10*time.Second, "two rescans after the commit", func() bool { return testutil.ToFloat64(h.metrics.Rescans) >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := h.cursor(); c.Block != 25 || c.Hash != node.hash(25).Hex() {
		t.Fatalf("cursor = %d/%s, want 25/%s", c.Block, c.Hash, node.hash(25).Hex())
	}
	if n := testutil.ToFloat64(h.metrics.PaymentsInserted); n != float64(len(burns)) {
		t.Fatalf("inserted metric = %v, want %d", n, len(burns))
	}
	if n := count(failuresQuery); n < failures {
		t.Fatalf("hook failures went from %d to %d", failures, n)
	}
	// Exactly one credit per payment, for the payment's payer and amount.
	rowsOf := func(query string) []string {
		t.Helper()
		rows, err := h.pool.Query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var (
				id            int64
				payer, amount string
			)
			if err := rows.Scan(&id, &payer, &amount); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s %s", id, payer, amount))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	paid := rowsOf(`SELECT id, payer, amount::text FROM payments ORDER BY id`)
	credited := rowsOf(`SELECT payment_id, payer, amount::text FROM credit_log ORDER BY payment_id, payer, amount`)
	if len(paid) != len(burns) || !slices.Equal(credited, paid) {
		t.Fatalf("credit log:\n%s\nwant one credit per payment:\n%s", strings.Join(credited, "\n"), strings.Join(paid, "\n"))
	}
	// Each balance is the exact sum of its payer's payments.
	rows, err := h.pool.Query(ctx, `SELECT payer, amount::text FROM credits`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var payer, amount string
		if err := rows.Scan(&payer, &amount); err != nil {
			t.Fatal(err)
		}
		got[payer] = amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantCredits) {
		t.Fatalf("credits = %v, want %v", got, wantCredits)
	}
	for payer, amount := range wantCredits {
		if got[payer] != amount.String() {
			t.Fatalf("credit of %s = %s, want %s (all credits %v)", payer, got[payer], amount, got)
		}
	}
	// Over the whole run, no block was skipped: every range asked starts
	// over at block 0 or continues the one asked before it.
	asked := node.requested()
	for i, r := range asked {
		if r[1] > 25 || (r[0] != 0 && (i == 0 || r[0] != asked[i-1][1]+1)) {
			t.Fatalf("range %v asked out of order (ranges %v)", r, asked)
		}
	}
}
