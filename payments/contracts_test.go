package payments_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/payments"
)

// TestSyncMembers walks a group through its contract changes: the first
// writer's contracts are followed from their first blocks; one added later
// is followed from the block after the cursor with its history pending; a
// writer lacking a member is refused unless removal is allowed; a removed
// member added again has only the blocks it missed pending.
func TestSyncMembers(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	contractC := "0x" + strings.Repeat("ef", 20)
	a := payments.MemberSpec{Contract: contractA, FirstBlock: 5}
	b := payments.MemberSpec{Contract: contractB, FirstBlock: 20}
	c := payments.MemberSpec{Contract: contractC, FirstBlock: 500}
	if _, err := s.SeedCursor(ctx, "g", 4, ""); err != nil {
		t.Fatal(err)
	}
	type member struct {
		contract            string
		first, liveFrom     int64
		backfilled, removed bool
	}
	steps := []struct {
		name         string
		cursor       int64 // moved to before the step
		want         []payments.MemberSpec
		allowRemoval bool
		wantErr      error
		members      []member
	}{
		{"the first writer's contracts are followed from their first blocks", 4, []payments.MemberSpec{a}, false, nil,
			[]member{{contractA, 5, 5, true, false}}},
		{"the same set changes nothing", 50, []payments.MemberSpec{a}, false, nil,
			[]member{{contractA, 5, 5, true, false}}},
		{"an added contract is followed after the cursor, its history pending", 100, []payments.MemberSpec{a, b}, false, nil,
			[]member{{contractA, 5, 5, true, false}, {contractB, 20, 101, false, false}}},
		{"one starting above the cursor has no history to read", 100, []payments.MemberSpec{a, b, c}, false, nil,
			[]member{{contractA, 5, 5, true, false}, {contractB, 20, 101, false, false}, {contractC, 500, 101, true, false}}},
		{"a writer lacking members is refused", 120, []payments.MemberSpec{a}, false, payments.ErrContractsMismatch, nil},
		{"told to, it removes them", 120, []payments.MemberSpec{a}, true, nil,
			[]member{{contractA, 5, 5, true, false}, {contractB, 20, 101, false, true}, {contractC, 500, 101, true, true}}},
		{"re-added, an unfinished history is read whole; one starting above the cursor has none", 200, []payments.MemberSpec{a, b, c}, false, nil,
			[]member{{contractA, 5, 5, true, false}, {contractB, 20, 201, false, false}, {contractC, 500, 201, true, false}}},
	}
	for _, st := range steps {
		tx, err := s.Begin(ctx, limits)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := tx.LockCursor(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if cur.Block != st.cursor {
			if err := tx.MoveCursor(ctx, "g", cur.Block, st.cursor, ""); err != nil {
				t.Fatal(err)
			}
			cur.Block = st.cursor
		}
		got, _, err := tx.SyncMembers(ctx, cur, 1337, st.want, st.allowRemoval)
		if !errors.Is(err, st.wantErr) || (err != nil && st.wantErr == nil) {
			t.Fatalf("%s: SyncMembers = %v, want %v", st.name, err, st.wantErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), contractB) || !strings.Contains(err.Error(), "ALLOW_CONTRACT_REMOVAL") {
				t.Fatalf("%s: error %q does not name the contract and the way out", st.name, err)
			}
			tx.Rollback()
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		var have []member
		for _, m := range got {
			have = append(have, member{m.Contract, m.FirstBlock, m.LiveFrom, m.Backfilled, m.Removed})
		}
		if len(have) != len(st.members) {
			t.Fatalf("%s: members %+v, want %+v", st.name, have, st.members)
		}
		for i := range have {
			if have[i] != st.members[i] {
				t.Fatalf("%s: members %+v, want %+v", st.name, have, st.members)
			}
		}
	}
	// A stale mark (of the backfill before the removal) does nothing; the
	// current one takes the contract off the pending list.
	pending := func() []string {
		ms, err := s.Members(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			if m.Pending() {
				out = append(out, m.Contract)
			}
		}
		return out
	}
	if err := s.MarkBackfilled(ctx, "g", contractB, 101); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 1 || p[0] != contractB {
		t.Fatalf("pending %v after a stale mark, want only %s", p, contractB)
	}
	if err := s.MarkBackfilled(ctx, "g", contractB, 201); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("pending %v, want none", p)
	}
}
