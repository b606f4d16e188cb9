package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// randomHexBytes returns n random bytes as 0x-prefixed hex.
func randomHexBytes(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return "0x" + hex.EncodeToString(b)
}

// TestTailPrintsEveryPaymentOnce runs `poller tail --json` beside a replica
// with a small MAX_BLOCK_RANGE (a few payments per notification), with
// forged notifications before and after (NOTIFY needs no privilege: any
// role that can connect may send one), and a backfill of the whole range
// under another cursor (nothing new: no notification). tail prints each
// payment exactly once, as the table has it, never the forged payment, and
// stops on SIGINT with exit 0.
func TestTailPrintsEveryPaymentOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newFaultRun(t, 1)
	env := pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr)
	if out, code := runPoller(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate exited %d:\n%s", code, out)
	}
	tail := startProc(t, "tail", env, "poller", "tail", "--json")
	waitFor(t, time.Minute, "tail listening", func() bool { return pollerSessions(t, r.pool, `query ILIKE 'LISTEN %'`) > 0 })

	// A made-up payment, and a range claiming every id there will be.
	fakeHash := randomHexBytes(32)
	fakeAmount, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 200))
	fakeAmount.Add(fakeAmount, new(big.Int).Lsh(big.NewInt(1), 200)) // 61 digits: no real amount here has them
	forged, err := json.Marshal(payments.Notification{ChainID: r.info.ChainID, Contract: strings.ToLower(r.info.BurnContract.Hex()),
		Count: 1, FirstID: 1, LastID: 1,
		Payments: []payments.NotifiedItem{{ID: 1, TxHash: fakeHash, BlockNumber: 1, Payer: randomHexBytes(20), Digest: randomHexBytes(32), Amount: fakeAmount.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	forge := func(payload string) {
		t.Helper()
		if _, err := r.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.NotifyChannel, payload); err != nil {
			t.Fatal(err)
		}
	}
	forge(string(forged))
	forge(`{"count":5,"first_id":0,"last_id":1099511627776}`)

	r.startPoller("MAX_BLOCK_RANGE=3")
	r.caughtUp(2 * time.Minute)
	r.finish(time.Minute)

	want := map[string]int{}
	rows, err := r.pool.Query(ctx, `SELECT id, tx_hash, log_index, block_number, payer, digest, amount::text FROM payments`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var it payments.NotifiedItem
		if err := rows.Scan(&it.ID, &it.TxHash, &it.LogIndex, &it.BlockNumber, &it.Payer, &it.Digest, &it.Amount); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("%+v", it)]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 36 {
		t.Fatalf("%d payments, want 36", len(want))
	}
	printed := func() map[string]int {
		got := map[string]int{}
		for line := range strings.Lines(tail.out.String()) {
			var it payments.NotifiedItem
			if !strings.HasPrefix(line, `{"id":`) || json.Unmarshal([]byte(line), &it) != nil {
				continue
			}
			got[fmt.Sprintf("%+v", it)]++
		}
		return got
	}
	waitFor(t, 30*time.Second, "tail to print 36 payments", func() bool { return len(printed()) >= 36 })
	// Every burn again, as duplicates: nothing new, nothing printed.
	if out, code := runPoller(t, env, "backfill", "--from", "0", "--to", fmt.Sprint(cursorBlock(t, r.pool))); code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	} else if s := summaryOf(t, out); s.Inserted != 0 || s.Duplicates != 36 {
		t.Fatalf("backfill summary = %+v, want 36 duplicates", s)
	}
	forge(string(forged))
	forge(`{"count":36,"first_id":1,"last_id":1099511627776}`)
	// Then one more row, written as an application would: notifications
	// arrive in commit order, so once tail prints it, it has handled
	// everything before it.
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var last payments.NotifiedItem
	if err := tx.QueryRow(ctx, `INSERT INTO payments
		(chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
		VALUES ($1, $2, $3, 0, 1, $4, $5, $6, 42, now())
		RETURNING id, tx_hash, log_index, block_number, payer, digest, amount::text`,
		int64(r.info.ChainID), strings.ToLower(r.info.BurnContract.Hex()), randomHexBytes(32), randomHexBytes(32), randomHexBytes(20), randomHexBytes(32),
	).Scan(&last.ID, &last.TxHash, &last.LogIndex, &last.BlockNumber, &last.Payer, &last.Digest, &last.Amount); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, payments.NotifyChannel,
		fmt.Sprintf(`{"count":1,"first_id":%d,"last_id":%d}`, last.ID, last.ID)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want[fmt.Sprintf("%+v", last)]++
	waitFor(t, 30*time.Second, "tail to print the last payment", func() bool { return printed()[fmt.Sprintf("%+v", last)] > 0 })

	if got := printed(); !maps.Equal(got, want) {
		t.Fatalf("tail printed %d distinct payments (%v), want each of the %d once", len(got), got, len(want))
	}
	if out := tail.out.String(); strings.Contains(out, fakeHash) || strings.Contains(out, fakeAmount.String()) {
		t.Fatalf("tail printed the forged payment (%s, %s):\n%s", fakeHash, fakeAmount, out)
	}
	tail.signal(syscall.SIGINT)
	if code := tail.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("tail exited %d after SIGINT", code)
	}
}
