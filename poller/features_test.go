package poller_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

// Where two features meet: contracts that come and go, event identity
// across orphanings and failovers, rescans and backfills of groups whose
// contracts changed.

var otherContract = common.HexToAddress("0x00000000000000000000000000000000000000c2")

// groupWriter is a writer of the live group "test" following contracts,
// each from block 0.
func (h *harness) groupWriter(allowRemoval bool, contracts ...common.Address) *poller.Writer {
	h.t.Helper()
	cfg := h.wcfg
	cfg.Contracts = contracts
	cfg.Group = &poller.GroupConfig{CursorID: "test", FirstBlocks: make([]int64, len(contracts)), AllowRemoval: allowRemoval}
	w := poller.NewWriter(cfg, h.store, h.node, nil, h.log)
	if _, err := w.Seed(context.Background(), "test", -1); err != nil {
		h.t.Fatal(err)
	}
	return w
}

// eventLines are the events as "kind tx/index@block reason".
func (h *harness) eventLines() []string {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), 0, 10_000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s/%d@%d %s", e.Kind, e.TxHash, e.LogIndex, e.BlockNumber, e.Reason)))
	}
	return out
}

// TestRemovedContractsPendingBurnsAreResolved: a group follows A and B;
// head tracking sees a burn of B above the target; B is removed
// (ALLOW_CONTRACT_REMOVAL). In the transaction that records the removal,
// B's pending burn is retracted, saying why, unless another group still
// follows B: then it stays for that group's head tracking.
func TestRemovedContractsPendingBurnsAreResolved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("another group follows B: %v", shared), func(t *testing.T) {
			t.Parallel()
			node := newFakeChain(10)
			node.setHead(15)
			b := node.addBurnOf(otherContract, 13, 7, 0, 70)
			h := newHarness(t, node)
			if shared {
				other := h.wcfg
				other.Contracts = []common.Address{otherContract}
				other.Group = &poller.GroupConfig{CursorID: "other", FirstBlocks: []int64{0}}
				ow := poller.NewWriter(other, h.store, node, nil, h.log)
				if _, err := ow.Seed(ctx, "other", -1); err != nil {
					t.Fatal(err)
				}
				advance(t, ow, node, "other")
			}
			both := h.groupWriter(false, burnContract, otherContract)
			advance(t, both, node, "test")
			track(t, both, "test")
			if got, want := h.pending(), pend(b); !slices.Equal(got, want) {
				t.Fatalf("pending %v, want %v", got, want)
			}
			// B removed: the next transaction of the group records it.
			onlyA := h.groupWriter(true, burnContract)
			res := track(t, onlyA, "test")
			want := []string{fmt.Sprintf("seen %s/0@13", b.TxHash.Hex())}
			if !shared {
				want = append(want, fmt.Sprintf("retracted %s/0@13 contract no longer followed by its group", b.TxHash.Hex()))
				if len(h.pending()) != 0 || h.status(b) != "retracted - -" {
					t.Fatalf("pending %v, status %q after the removal; want none, retracted", h.pending(), h.status(b))
				}
			} else if got := h.pending(); !slices.Equal(got, pend(b)) {
				t.Fatalf("pending %v after the removal, want B's burn kept for the group that follows B", got)
			}
			if got := h.eventLines(); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			if res.Pending != 0 {
				t.Fatalf("the group's pending after the removal: %d, want 0", res.Pending)
			}
		})
	}
}

// receiver applies payment events as a careful consumer does: each event
// id once, in seq order; a burn is credited while the last event it
// applied for it is confirmed.
type receiver struct {
	applied map[string]bool
	last    map[string]string // burn key -> kind
}

func newReceiver() *receiver { return &receiver{applied: map[string]bool{}, last: map[string]string{}} }

func (r *receiver) consume(t *testing.T, s *payments.Store) {
	t.Helper()
	evs, err := s.Events(context.Background(), 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if r.applied[e.EventID] {
			continue
		}
		r.applied[e.EventID] = true
		r.last[e.Payment().Key().String()] = e.Kind
	}
}

// credited is what the receiver credits, as "contract/tx/index", sorted.
func (r *receiver) credited() []string {
	var out []string
	for k, kind := range r.last {
		if kind == payments.KindConfirmed {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// creditedIn is what the ledger credits: its payments not orphaned.
func creditedIn(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT contract, tx_hash, log_index FROM payments WHERE orphaned_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k payments.Key
		err := r.Scan(&k.Contract, &k.TxHash, &k.LogIndex)
		return k.String(), err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// standby is a copy of h's database as it stands now: what an asynchronous
// standby holds when the primary fails after it, the commits made from here
// on lost. The copy is dropped when the test ends.
func (h *harness) standby() *harness {
	h.t.Helper()
	ctx := context.Background()
	u, err := url.Parse(h.url)
	if err != nil {
		h.t.Fatal(err)
	}
	src := strings.TrimPrefix(u.Path, "/")
	dst := fmt.Sprintf("%s_standby_%d", src, time.Now().UnixNano()%1_000_000)
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(ctx)
	h.pool.Reset()
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, src); err != nil {
		h.t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q TEMPLATE %q`, dst, src)); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin.String())
		if err == nil {
			_, _ = c.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, dst))
			_ = c.Close(context.Background())
		}
	})
	cu := *u
	cu.Path = "/" + dst
	pool, err := pgxpool.New(ctx, cu.String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(pool.Close)
	s := *h
	s.url, s.pool, s.store = cu.String(), pool, payments.NewStore(pool)
	return &s
}

// TestEventIDsNameOneOccurrence: an event id names one occurrence of a
// step. A receiver that applies each id once ends with exactly the
// ledger's credit state after each life a burn can have, and after the
// same life cut short by an asynchronous failover that loses the tail of
// the log (the standby's writers then record again what the chain and the
// operator require, and a step recorded again has the id it had).
func TestEventIDsNameOneOccurrence(t *testing.T) {
	t.Parallel()
	type world struct {
		h    *harness
		w    *poller.Writer
		node *fakeChain
		x    chain.Burn
	}
	xTx := common.HexToHash("0xee")
	trackAny := func(t *testing.T, c *world) {
		t.Helper()
		ctx := context.Background()
		if _, err := c.w.TrackHead(ctx, ctx, "test", 100); err != nil && !errors.Is(err, poller.ErrHeadSkipped) {
			t.Fatal(err)
		}
	}
	reset := func(t *testing.T, c *world) {
		t.Helper()
		if _, err := c.w.Reset(context.Background(), "test", 11, poller.ResetOptions{MarkOrphaned: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Each step changes the chain (once, in the world) and then has the
	// ledger's writers, and its operator, do what that requires; after a
	// failover the standby's writers do the lost steps' part again, on
	// the chain as it is by then.
	type step struct {
		chain  func(c *world)
		ledger func(t *testing.T, c *world)
	}
	steps := map[string]step{
		// The burn is seen above the target, at block 12.
		"seen": {func(c *world) {
			c.node.setHead(15)
			c.x = c.node.addBurnTx(12, xTx, 0xee, 0, 500)
		}, func(t *testing.T, c *world) { t.Helper(); advance(t, c.w, c.node, "test"); trackAny(t, c) }},
		// Its block leaves the chain above the target.
		"dropped": {func(c *world) { c.node.reorg(12) }, trackAny},
		// The chain comes back to the branch it left.
		"back": {func(c *world) {
			c.node.unreorg()
			c.x = c.node.addBurnTx(12, xTx, 0xee, 0, 500)
		}, trackAny},
		// Final: confirmed.
		"final": {func(c *world) { c.node.setTarget(20) }, func(t *testing.T, c *world) { t.Helper(); advance(t, c.w, c.node, "test") }},
		// A reorganisation below finality drops it; an operator's reset
		// orphans the payment.
		"orphaned": {func(c *world) { c.node.reorg(12) }, func(t *testing.T, c *world) {
			t.Helper()
			reset(t, c)
			advance(t, c.w, c.node, "test")
		}},
		// The canonical chain serves the first branch again: the cursor
		// is reset below it, and the loop credits it again.
		"recredited": {func(c *world) {
			c.node.unreorg()
			c.x = c.node.addBurnTx(12, xTx, 0xee, 0, 500)
		}, func(t *testing.T, c *world) {
			t.Helper()
			reset(t, c)
			advance(t, c.w, c.node, "test")
		}},
	}
	tests := []struct {
		name  string
		steps []string
		// kinds: the ids' kinds and occurrences, in seq order.
		ids []string
	}{
		{"seen, retracted, seen, confirmed", []string{"seen", "dropped", "back", "final"},
			[]string{"seen", "retracted", "seen:2", "confirmed"}},
		{"confirmed, orphaned, credited again", []string{"seen", "final", "orphaned", "recredited"},
			[]string{"seen", "confirmed", "retracted", "confirmed:2"}},
		{"confirmed, orphaned, credited again, orphaned", []string{"seen", "final", "orphaned", "recredited", "orphaned"},
			[]string{"seen", "confirmed", "retracted", "confirmed:2", "retracted:2"}},
	}
	for _, tt := range tests {
		// Uninterrupted, then with a failover after each step: the steps
		// after it are lost, and the standby goes through them again.
		for cut := 0; cut < len(tt.steps); cut++ {
			name := tt.name + ", uninterrupted"
			if cut > 0 {
				name = fmt.Sprintf("%s, failover after %q", tt.name, tt.steps[cut-1])
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				node := newFakeChain(10)
				h := newHarness(t, node)
				c := &world{h: h, node: node, w: h.groupWriter(false, burnContract)}
				rcv := newReceiver()
				var copy *harness
				for i, s := range tt.steps {
					if cut > 0 && i == cut {
						copy = h.standby()
					}
					steps[s].chain(c)
					steps[s].ledger(t, c)
					rcv.consume(t, h.store)
				}
				if cut == 0 {
					if got := occurrences(t, h.store, c.x); !slices.Equal(got, tt.ids) {
						t.Fatalf("event ids %v, want %v", got, tt.ids)
					}
				} else {
					// The primary is gone; the standby's writers go
					// through the lost steps again on the chain as it
					// is now, and the receiver reads the standby.
					c.h = copy
					c.w = copy.groupWriter(false, burnContract)
					for _, s := range tt.steps[cut:] {
						steps[s].ledger(t, c)
					}
					rcv.consume(t, copy.store)
					h = copy
				}
				if got, want := rcv.credited(), creditedIn(t, h.pool); !slices.Equal(got, want) {
					t.Fatalf("the receiver credits %v, the ledger %v", got, want)
				}
			})
		}
	}
}

// occurrences are the events of burn b as "kind" or "kind:n" (the n-th
// occurrence), from their ids.
func occurrences(t *testing.T, s *payments.Store, b chain.Burn) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.TxHash != b.TxHash.Hex() {
			continue
		}
		base := payments.EventID(e.ChainID, e.TxHash, e.LogIndex, e.Kind, e.BlockHash)
		switch {
		case e.EventID == base:
			out = append(out, e.Kind)
		case strings.HasPrefix(e.EventID, base+":"):
			out = append(out, e.Kind+strings.TrimPrefix(e.EventID, base))
		default:
			t.Fatalf("event %d id %q is not of %s", e.Seq, e.EventID, base)
		}
	}
	return out
}

// TestRescanReadsAnAddedContractFromWhereTheGroupCoversIt: B joins a group
// whose cursor is past B's burns. The first rescan reads B only from the
// block the group's cursor covers it from (live_from): B's history below
// is its backfill's, and finding it missing there says nothing about a
// node. Nothing is recovered, nothing recorded for B below live_from.
func TestRescanReadsAnAddedContractFromWhereTheGroupCoversIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(20)
	node.addBurn(5, 1, 0, 10)
	node.addBurnOf(otherContract, 8, 2, 0, 20)  // B's history, below where the group covers it
	node.addBurnOf(otherContract, 23, 3, 0, 30) // after B joined
	h := newHarness(t, node)
	advance(t, h.groupWriter(false, burnContract), node, "test")
	both := h.groupWriter(false, burnContract, otherContract) // B joins at 21
	node.setTarget(25)
	advance(t, both, node, "test")
	tx, err := both.Begin(ctx, ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := tx.Rescan(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res.Recovered != 0 {
		t.Fatalf("the rescan recovered %d payments: it read B below where the group covers it", res.Recovered)
	}
	var below int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE contract = $1 AND block_number < 21`,
		strings.ToLower(otherContract.Hex())).Scan(&below); err != nil || below != 0 {
		t.Fatalf("%d payments of B below its live_from (%v), want none: B's history is its backfill's", below, err)
	}
	if got := len(h.ledger()); got != 2 {
		t.Fatalf("%d payments, want A's and B's at 23", got)
	}
}

// TestBackfillOfMoreContractsReadsThemAll: a backfill of [S, T] with A,
// then the same command with A and B: the second is another backfill (its
// id covers its contracts), which reads B's burns of [S, T].
func TestBackfillOfMoreContractsReadsThemAll(t *testing.T) {
	t.Parallel()
	node := newFakeChain(30)
	a := node.addBurn(12, 1, 0, 10)
	b := node.addBurnOf(otherContract, 14, 2, 0, 20)
	h := newHarness(t, node)
	run := func(contracts ...common.Address) poller.BackfillProgress {
		t.Helper()
		cfg := h.wcfg
		cfg.Contracts = contracts
		w := poller.NewWriter(cfg, h.store, node, nil, h.log)
		prog, err := poller.Backfill(context.Background(), w, poller.BackfillConfig{
			ID: poller.BackfillID("1337:"+strings.ToLower(burnContract.Hex()), contracts, 10, "20"), From: 10, To: 20})
		if err != nil {
			t.Fatal(err)
		}
		return prog
	}
	if p := run(burnContract); p.Inserted != 1 || p.Resumed {
		t.Fatalf("first backfill %+v, want 1 inserted", p)
	}
	if p := run(burnContract, otherContract); p.Resumed || p.Inserted != 1 || p.Duplicates != 1 {
		t.Fatalf("backfill with B added %+v: want a new backfill, B's burn inserted and A's a duplicate", p)
	}
	if got, want := h.ledger(), expected(a, b); !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
}

// TestGroupKeepsItsIdentityWhenItsFirstContractGoes: a group A,B (its id
// names A); a replica configured with B alone and no CURSOR_ID belongs to
// it (found by its recorded contracts), not to a new group; with B
// followed by two groups, start-up cannot tell and refuses, naming
// CURSOR_ID.
func TestGroupKeepsItsIdentityWhenItsFirstContractGoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(10)
	h := newHarness(t, node)
	idA := "1337:" + strings.ToLower(burnContract.Hex())
	idB := "1337:" + strings.ToLower(otherContract.Hex())
	resolve := func(contracts ...common.Address) (string, error) {
		return poller.ResolveGroup(ctx, h.store, 1337, contracts, "1337:"+strings.ToLower(contracts[0].Hex()))
	}
	if id, err := resolve(otherContract); err != nil || id != idB {
		t.Fatalf("a new group resolves to %q, %v; want its default id %q", id, err, idB)
	}
	cfg := h.wcfg
	cfg.Contracts = []common.Address{burnContract, otherContract}
	cfg.Group = &poller.GroupConfig{CursorID: idA, FirstBlocks: []int64{0, 0}}
	w := poller.NewWriter(cfg, h.store, node, nil, h.log)
	if _, err := w.Seed(ctx, idA, -1); err != nil {
		t.Fatal(err)
	}
	advance(t, w, node, idA)
	if id, err := resolve(otherContract); err != nil || id != idA {
		t.Fatalf("B alone resolves to %q, %v; want the group that follows it, %q", id, err, idA)
	}
	if id, err := resolve(burnContract, otherContract); err != nil || id != idA {
		t.Fatalf("A,B resolve to %q, %v; want %q", id, err, idA)
	}
	// A second group follows B too: which one is meant is not known.
	cfg.Contracts, cfg.Group = []common.Address{otherContract}, &poller.GroupConfig{CursorID: "second", FirstBlocks: []int64{0}}
	w2 := poller.NewWriter(cfg, h.store, node, nil, h.log)
	if _, err := w2.Seed(ctx, "second", -1); err != nil {
		t.Fatal(err)
	}
	advance(t, w2, node, "second")
	if id, err := resolve(otherContract); err == nil || !strings.Contains(err.Error(), "CURSOR_ID") {
		t.Fatalf("B followed by two groups resolves to %q, %v; want an error naming CURSOR_ID", id, err)
	}
}

// TestDiffPending is head tracking's decision, without Postgres: what
// leaves pending_payments, what is put, and which events say so.
func TestDiffPending(t *testing.T) {
	t.Parallel()
	const a, b = "0x00000000000000000000000000000000000000aa", "0x00000000000000000000000000000000000000bb"
	p := func(tx byte, block int64, hash string) payments.Payment {
		return payments.Payment{ChainID: 1337, Contract: a, TxHash: fmt.Sprintf("0x%064x", tx), BlockNumber: block, BlockHash: hash,
			Amount: nil}
	}
	of := func(contract string, x payments.Payment) payments.Payment { x.Contract = contract; return x }
	row := func(x payments.Payment) payments.Pending { return payments.Pending{Payment: x} }
	key := func(x payments.Payment) payments.Key { return x.Key() }
	type want struct {
		drop, put, events []string
		pending           int
	}
	show := func(ps []payments.Payment) []string {
		var out []string
		for _, x := range ps {
			out = append(out, fmt.Sprintf("%s@%d", x.TxHash[len(x.TxHash)-2:], x.BlockNumber))
		}
		return out
	}
	tests := []struct {
		name     string
		from     int64
		to       int64
		rows     []payments.Pending
		onChain  []payments.Payment
		recorded map[payments.Key]string
		want     want
	}{
		{name: "a new burn is seen", from: 11, to: 15, onChain: []payments.Payment{p(1, 12, "a")},
			want: want{put: []string{"01@12"}, events: []string{"seen 01@12"}, pending: 1}},
		{name: "the same burn at the same block is kept", from: 11, to: 15, rows: []payments.Pending{row(p(1, 12, "a"))},
			onChain: []payments.Payment{p(1, 12, "a")}, want: want{pending: 1}},
		{name: "re-included elsewhere moves", from: 11, to: 15, rows: []payments.Pending{row(p(1, 12, "a"))},
			onChain: []payments.Payment{p(1, 13, "b")},
			want:    want{put: []string{"01@13"}, events: []string{"retracted 01@12", "seen 01@13"}, pending: 1}},
		{name: "gone is retracted", from: 11, to: 15, rows: []payments.Pending{row(p(1, 12, "a"))},
			want: want{drop: []string{"01@12"}, events: []string{"retracted 01@12"}}},
		{name: "above the window is not judged", from: 11, to: 11, rows: []payments.Pending{row(p(1, 12, "a"))},
			want: want{pending: 1}},
		{name: "below the step (at or below the cursor, or judged by an earlier pass) is not judged", from: 19, to: 20, rows: []payments.Pending{row(p(1, 15, "a"))},
			want: want{pending: 1}},
		{name: "recorded where it was seen leaves quietly", from: 13, to: 15, rows: []payments.Pending{row(p(1, 12, "a"))},
			recorded: map[payments.Key]string{key(p(1, 0, "")): "a"}, want: want{drop: []string{"01@12"}}},
		{name: "recorded elsewhere is retracted", from: 14, to: 15, rows: []payments.Pending{row(p(1, 12, "a"))},
			recorded: map[payments.Key]string{key(p(1, 0, "")): "b"}, want: want{drop: []string{"01@12"}, events: []string{"retracted 01@12"}}},
		{name: "a burn on the chain already recorded is not seen", from: 11, to: 15, onChain: []payments.Payment{p(1, 12, "a")},
			recorded: map[payments.Key]string{key(p(1, 0, "")): "a"}, want: want{}},
		// A transaction re-included elsewhere can carry another contract's
		// burn at the index where it carried this one's: two burns, not
		// one moved.
		{name: "another contract's burn at the same transaction and index is another burn", from: 11, to: 15,
			rows: []payments.Pending{row(p(1, 12, "a"))}, onChain: []payments.Payment{of(b, p(1, 13, "b"))},
			want: want{drop: []string{"01@12"}, put: []string{"01@13"}, events: []string{"retracted 01@12", "seen 01@13"}, pending: 1}},
		{name: "another contract's recorded burn at the same key does not settle this one", from: 11, to: 15,
			onChain: []payments.Payment{p(1, 12, "a")}, recorded: map[payments.Key]string{key(of(b, p(1, 0, ""))): "a"},
			want: want{put: []string{"01@12"}, events: []string{"seen 01@12"}, pending: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := poller.DiffPending(tt.from, tt.to, tt.rows, tt.onChain, tt.recorded)
			var events []string
			for _, e := range d.Events {
				events = append(events, fmt.Sprintf("%s %s@%d", e.Kind, e.TxHash[len(e.TxHash)-2:], e.BlockNumber))
			}
			got := want{drop: show(d.Drop), put: show(d.Put), events: events, pending: d.Pending}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("diff %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestResetSkippingAPendingBurnDoesNotRetractIt: a burn at block 15 is
// seen; the cursor is reset with --allow-skip to 18; head tracking never
// retracts it for lying below its window (its block never left the chain):
// it stays seen until whatever records block 15 (a backfill) settles it.
func TestResetSkippingAPendingBurnDoesNotRetractIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(10)
	node.setHead(20)
	b := node.addBurn(15, 1, 0, 10)
	h := newHarness(t, node)
	w := h.groupWriter(false, burnContract)
	advance(t, w, node, "test")
	track(t, w, "test")
	node.setTarget(18)
	if _, err := w.Reset(ctx, "test", 18, poller.ResetOptions{AllowSkip: true}); err != nil {
		t.Fatal(err)
	}
	track(t, w, "test")
	if got := h.status(b); !strings.HasPrefix(got, "seen") {
		t.Fatalf("payment_status %q after a skipping reset, want seen", got)
	}
	if got := h.eventLines(); len(got) != 1 {
		t.Fatalf("events %v, want the seen alone", got)
	}
	// A backfill of the skipped blocks settles it: confirmed.
	if _, err := poller.Backfill(ctx, w, poller.BackfillConfig{ID: "backfill:skipped", From: 11, To: 18}); err != nil {
		t.Fatal(err)
	}
	if got := h.status(b); !strings.HasPrefix(got, "confirmed") {
		t.Fatalf("payment_status %q after the backfill, want confirmed", got)
	}
}

// TestAWriterNeverWaitsOnTheNodeHoldingTheWritersLock: a backfill of a
// contract records its first range, then its next fetch hangs (a slow
// provider). It committed rather than wait holding the contract's writers'
// lock, so the live loop records meanwhile within its short lock wait; when
// the fetch returns, the backfill goes on with it (not fetched twice) and
// completes. The ledger is exact.
func TestAWriterNeverWaitsOnTheNodeHoldingTheWritersLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(40)
	want := expected(node.addBurn(2, 1, 0, 10), node.addBurn(7, 2, 0, 20), node.addBurn(25, 3, 0, 30))
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	node.hook = func(ctx context.Context, from, _ uint64) {
		if from != 5 {
			return
		}
		once.Do(func() {
			close(blocked)
			select {
			case <-release:
			case <-ctx.Done():
			}
		})
	}
	h := newHarness(t, node)
	cfg := h.wcfg
	cfg.MaxBlockRange = 5
	backfill := poller.NewWriter(cfg, h.store, node, nil, h.log)
	done := make(chan error, 1)
	go func() {
		_, err := poller.Backfill(ctx, backfill, poller.BackfillConfig{ID: "backfill:slow", From: 0, To: 20})
		done <- err
	}()
	<-blocked
	live := poller.NewWriter(h.wcfg, h.store, node, nil, h.log) // LOCK_WAIT 100 ms
	if _, err := live.Seed(ctx, "test", 20); err != nil {
		t.Fatal(err)
	}
	if res := advance(t, live, node, "test"); res.To != 40 || res.Inserted != 1 {
		t.Fatalf("the live loop beside the stalled backfill: %+v", res)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
	asked := 0
	for _, r := range node.requested() {
		if r[0] == 5 {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("blocks from 5 asked %d times, want once: the range in flight is the next transaction's", asked)
	}
}

// TestHeadTrackingReadsAWideWindowInSteps: the head runs 1,000 blocks ahead
// of the target behind a provider capping eth_getLogs at 50 blocks. Each
// pass reads one range from where the last one stood and commits: the burn
// just above the target is seen by the first pass, the window is read once
// in 20 passes, and from then on each block of head movement costs one read
// (none while the head stands still).
func TestHeadTrackingReadsAWideWindowInSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := newFakeChain(10)
	node.setHead(1010)
	node.maxSpan = 50
	near := node.addBurn(11, 1, 0, 1)
	far := node.addBurn(1000, 2, 0, 2)
	h := newHarness(t, node)
	h.wcfg.MaxBlockRange = 100
	w := h.groupWriter(false, burnContract)
	advance(t, w, node, "test")
	asked := func() int { return len(node.requested()) }
	before := asked()
	res, err := w.TrackHead(ctx, ctx, "test", 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 11 || res.To != 60 || !res.Behind || res.Seen != 1 || asked()-before != 1 {
		t.Fatalf("first pass %+v after %d reads; want blocks 11-60 in one read, the burn at 11 seen, more to read", res, asked()-before)
	}
	if got := h.pending(); !slices.Equal(got, pend(near)) {
		t.Fatalf("pending after the first pass %v", got)
	}
	passes := 1
	for res.Behind {
		if res, err = w.TrackHead(ctx, ctx, "test", 10_000); err != nil {
			t.Fatal(err)
		}
		passes++
	}
	if passes != 20 || asked()-before != 20 {
		t.Fatalf("%d passes and %d reads for a window of 1,000 blocks, want 20 each", passes, asked()-before)
	}
	if got := h.pending(); !slices.Equal(got, pend(near, far)) {
		t.Fatalf("pending after the window %v", got)
	}
	// The head moves 30 blocks: one read. It stands still: none.
	node.setHead(1040)
	before = asked()
	if res, err = w.TrackHead(ctx, ctx, "test", 10_000); err != nil || res.From != 1011 || res.To != 1040 || res.Behind || asked()-before != 1 {
		t.Fatalf("pass after 30 new blocks: %+v, %v, %d reads", res, err, asked()-before)
	}
	before = asked()
	if res, err = w.TrackHead(ctx, ctx, "test", 10_000); err != nil || res.To >= res.From || asked() != before {
		t.Fatalf("pass with the head still: %+v, %v, %d reads", res, err, asked()-before)
	}
	if got := h.eventLines(); len(got) != 2 {
		t.Fatalf("events %v, want the two seen", got)
	}
}
