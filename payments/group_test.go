package payments_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/payments"
)

var (
	contractA = "0x" + strings.Repeat("ab", 20)
	contractB = "0x" + strings.Repeat("cd", 20)
)

func TestAgreeOnHook(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	a, b := payments.HookDigest("INSERT INTO credits VALUES ($8, $10)"), payments.HookDigest("SELECT 1")
	steps := []struct {
		name    string
		digest  string
		replace bool
		wantErr bool
	}{
		{"the first writer records its hook", a, false, false},
		{"the same hook agrees", a, false, false},
		{"another hook is refused", b, false, true},
		{"no hook is refused too", "", false, true},
		{"told to, it replaces the group's", b, true, false},
		{"the old one is refused now", a, false, true},
	}
	for _, st := range steps {
		err := s.AgreeOnHook(ctx, 1337, contractA, st.digest, st.replace)
		if gotErr := errors.Is(err, payments.ErrHookMismatch); gotErr != st.wantErr || (err != nil && !gotErr) {
			t.Fatalf("%s: AgreeOnHook = %v", st.name, err)
		}
	}
	// Other contracts and chains are not concerned.
	if err := s.AgreeOnHook(ctx, 1337, contractB, "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.AgreeOnHook(ctx, 10, contractA, "", false); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.CheckHook(ctx, 1337, []string{contractA}, b, payments.HoldHookRecords); err != nil {
		t.Fatalf("CheckHook with the recorded hook = %v", err)
	}
	if err := tx.CheckHook(ctx, 1337, []string{contractA}, a, payments.ReadHookRecords); !errors.Is(err, payments.ErrHookMismatch) || strings.Contains(err.Error(), a[:8]) || strings.Contains(err.Error(), b[:8]) {
		t.Fatalf("CheckHook with another hook = %v", err)
	}
	if err := tx.CheckHook(ctx, 1337, []string{"0x" + strings.Repeat("ee", 20)}, a, payments.HoldHookRecords); err != nil {
		t.Fatalf("CheckHook of a contract that recorded none = %v", err)
	}
	if payments.HookDigest("  ") != "" || len(a) != 64 {
		t.Fatalf("HookDigest: blank %q, statement %q", payments.HookDigest("  "), a)
	}
}

// TestTheKeyIsPerChain: the same transaction hash and log index on two
// chains are two payments; on one chain, one.
func TestTheKeyIsPerChain(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	onA := payment(1, 0, big.NewInt(5))
	onB := onA
	onB.ChainID = 10
	if n := commitRange(t, s, "c", -1, 10, []payments.Payment{onA, onB, onA}); n != 2 {
		t.Fatalf("%d inserted, want 2 (one per chain)", n)
	}
	var chains []int64
	rows, err := pool.Query(ctx, `SELECT chain_id FROM payments ORDER BY chain_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		chains = append(chains, c)
	}
	rows.Close()
	if !slices.Equal(chains, []int64{10, 1337}) {
		t.Fatalf("chains = %v, want [10 1337]", chains)
	}
	// The same holds for rejected logs.
	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rj := payments.RejectedLog{ChainID: 1337, Contract: onA.Contract, TxHash: onA.TxHash, BlockNumber: 7, BlockHash: onA.BlockHash, Raw: []byte(`{}`), Reason: "x"}
	rj2 := rj
	rj2.ChainID = 10
	if n, err := tx.InsertRejected(ctx, []payments.RejectedLog{rj, rj2, rj}); err != nil || n != 2 {
		t.Fatalf("InsertRejected = %d, %v; want 2 new", n, err)
	}
}

func TestLedgerRowsAndOrphans(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.SeedCursor(ctx, "c", -1, ""); err != nil {
		t.Fatal(err)
	}
	at := func(tx byte, block int64) payments.Payment {
		p := payment(tx, 0, big.NewInt(int64(tx)))
		p.BlockNumber = block
		return p
	}
	otherContract := at(9, 12)
	otherContract.Contract = "0x" + strings.Repeat("cc", 20)
	commitRange(t, s, "c", -1, 30, []payments.Payment{at(1, 5), at(2, 10), at(3, 12), at(4, 20), otherContract})
	contracts := []string{at(1, 0).Contract}

	tx, err := s.Begin(ctx, limits)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	blocksOf := func(rs []payments.Recorded) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.BlockNumber)
		}
		return out
	}
	// Rows in [10, 12], and the rows of tx 4 wherever they are.
	rows, err := tx.LedgerRows(ctx, 1337, contracts, 10, 12, []string{at(4, 0).TxHash})
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksOf(rows); !slices.Equal(got, []int64{10, 12, 20}) {
		t.Fatalf("LedgerRows blocks = %v, want [10 12 20]", got)
	}
	// Block 12's canonical hash is now another; 10's and 20's are the
	// ledger's. Nothing at or below block 5 is looked at.
	marked, err := tx.MarkOrphanedOffChain(ctx, 1337, contracts, 5, []int64{10, 12, 20},
		[]string{at(2, 10).BlockHash, "0x" + strings.Repeat("99", 32), at(4, 20).BlockHash})
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != 1 || marked[0].BlockNumber != 12 || !marked[0].Orphaned || marked[0].ID != rows[1].ID {
		t.Fatalf("marked %+v, want the row at block 12", marked)
	}
	rows, err = tx.LedgerRows(ctx, 1337, contracts, 0, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := blocksOf(rows); !slices.Equal(got, []int64{5, 10, 20}) {
		t.Fatalf("LedgerRows after orphaning block 12 = %v, want [5 10 20]", got)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	blocks, err := s.PaymentBlocksAbove(ctx, 1337, contracts, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(blocks, []int64{10, 20}) {
		t.Fatalf("PaymentBlocksAbove(5) = %v, want [10 20]", blocks)
	}
	recs, err := s.PaymentsInBlocks(ctx, 1337, contracts[:1], 12, 12)
	if err != nil || len(recs) != 1 || !recs[0].Orphaned {
		t.Fatalf("PaymentsInBlocks(12) = %+v, %v; want the orphaned row", recs, err)
	}
	// The key is free again: the same burn in a new block is a payment of
	// its own, and a second copy of it a duplicate.
	again := at(3, 13)
	again.BlockHash = "0x" + strings.Repeat("99", 32)
	if n := commitRange(t, s, "c", 30, 31, []payments.Payment{again, again}); n != 1 {
		t.Fatalf("%d inserted under the orphaned row's key, want 1", n)
	}
}

// TestAKeyNamesItsContract: one transaction burns on the contracts of
// three groups on one chain and is re-included so that its log 7 is group
// A's burn in one block, B's in another and C's in a third (a log index is
// a place in a block). Each group's rows are its own: B's pending row and
// payment do not wait on A's uncommitted ones, B's insert is not taken for
// a duplicate once A commits, B's settling of its range leaves A's pending
// row alone, and each group finds only its own recorded payment.
func TestAKeyNamesItsContract(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := context.Background()
	burn := func(contract string, block int64, amount int64) payments.Payment {
		p := payment(7, 7, big.NewInt(amount))
		p.Contract, p.BlockNumber, p.BlockHash = contract, block, "0x"+strings.Repeat(fmt.Sprintf("%02x", block), 32)
		return p
	}
	a := burn("0x"+strings.Repeat("aa", 20), 12, 100)
	b := burn("0x"+strings.Repeat("bb", 20), 13, 200)
	c := burn("0x"+strings.Repeat("cc", 20), 14, 300)

	// A's transaction has put its pending row and inserted its payment
	// and rejected log, and is still open (a frozen replica).
	txA, err := s.Begin(ctx, payments.Limits{LockWait: time.Minute, TxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback()
	if err := txA.PutPending(ctx, []payments.Payment{a}); err != nil {
		t.Fatal(err)
	}
	if ins, err := txA.InsertPayments(ctx, []payments.Payment{a}); err != nil || len(ins) != 1 {
		t.Fatalf("A's insert = %d, %v", len(ins), err)
	}
	rejected := func(p payments.Payment) payments.RejectedLog {
		return payments.RejectedLog{ChainID: p.ChainID, Contract: p.Contract, TxHash: p.TxHash, LogIndex: p.LogIndex,
			BlockNumber: p.BlockNumber, BlockHash: p.BlockHash, Raw: []byte(`{}`), Reason: "x"}
	}
	if n, err := txA.InsertRejected(ctx, []payments.RejectedLog{rejected(a)}); err != nil || n != 1 {
		t.Fatalf("A's rejected log = %d, %v", n, err)
	}

	// B and C wait at most 100 ms for any lock: a row of A's in their way
	// fails them.
	short := payments.Limits{LockWait: 100 * time.Millisecond, TxTimeout: 5 * time.Second}
	for _, p := range []payments.Payment{b, c} {
		tx, err := s.Begin(ctx, short)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if err := tx.PutPending(ctx, []payments.Payment{p}); err != nil {
			t.Fatalf("%s's pending row beside A's open one: %v", p.Contract, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	txB, err := s.Begin(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	defer txB.Rollback()
	if n, err := txB.InsertRejected(ctx, []payments.RejectedLog{rejected(b)}); err != nil || n != 1 {
		t.Fatalf("B's rejected log beside A's open one = %d, %v; want 1 new", n, err)
	}
	// B records its range: its pending rows settle (A's, of another
	// contract, stays) and its payment goes in.
	taken, err := txB.TakePending(ctx, b.ChainID, []string{b.Contract}, 13, 13, []payments.Payment{b})
	if err != nil || len(taken) != 1 || taken[0].Key() != b.Key() {
		t.Fatalf("B's range took pending rows %v, %v; want only its own", taken, err)
	}
	if ins, err := txB.InsertPayments(ctx, []payments.Payment{b}); err != nil || len(ins) != 1 {
		t.Fatalf("B's insert beside A's open one = %d, %v; want 1", len(ins), err)
	}
	if err := txB.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txA.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// C records after A and B have committed.
	txC, err := s.Begin(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	defer txC.Rollback()
	recorded, err := txC.RecordedBlockHashes(ctx, c.ChainID, []payments.Payment{c})
	if err != nil || len(recorded) != 0 {
		t.Fatalf("C's burn found recorded as %v, %v: another contract's payment under its key", recorded, err)
	}
	if ins, err := txC.InsertPayments(ctx, []payments.Payment{c}); err != nil || len(ins) != 1 {
		t.Fatalf("C's insert = %d, %v; want 1", len(ins), err)
	}
	if err := txC.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var got []string
	rows, err := pool.Query(ctx, `SELECT 'payment ' || contract || ' ' || log_index || ' ' || amount FROM payments
		UNION ALL SELECT 'pending ' || contract || ' ' || log_index FROM pending_payments
		UNION ALL SELECT 'rejected ' || contract || ' ' || log_index FROM rejected_logs ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"payment " + a.Contract + " 7 100", "payment " + b.Contract + " 7 200", "payment " + c.Contract + " 7 300",
		"pending " + a.Contract + " 7", "pending " + c.Contract + " 7",
		"rejected " + a.Contract + " 7", "rejected " + b.Contract + " 7",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each group finds its own payment under the key, and only its own.
	for _, p := range []payments.Payment{a, b, c} {
		recs, err := s.PaymentsByKey(ctx, p.ChainID, []payments.Key{p.Key()})
		if err != nil || len(recs) != 1 || recs[0].Contract != p.Contract || recs[0].Amount.Cmp(p.Amount) != 0 {
			t.Fatalf("PaymentsByKey(%v) = %v, %v", p.Key(), recs, err)
		}
	}
}
