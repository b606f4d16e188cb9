package integration

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/probe"
)

// TestAStillHeadsBurnIsCredited: a chain that seals a block only when it
// has a transaction (an L3, Polygon zkEVM when idle) finalizes its last
// blocks minutes after it sealed them, when its parent chain finalizes,
// while its head stands still. One replica serves two groups: group one's
// chain is a dev chain sealed by the test, behind a proxy that holds its
// head (eth_blockNumber, latest, every block above it) at block N while
// the node's finalized block passes through up to N; group two's is a
// chain sealing every 100 ms with burns. A burn in block N-1 (or earlier,
// above the finalized block) is seen, then, once the node finalizes past
// N, confirmed and credited with the head still at N: the payment row as
// sent, its seen and confirmed events, the cursor at N with N's hash, and
// the replica ready, with the head, target and cursor metrics at N. Group
// two keeps pace meanwhile (past its finalized block, no poll failed), and
// each group's ledger equals its chain.
func TestAStillHeadsBurnIsCredited(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := func() uint64 {
		n, err := c.Client().BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sealTo := func(n uint64) {
		for head() < n {
			c.Seal()
		}
	}
	one := &chainGroup{name: "one", info: c.Info(), rpc: startProxy(t, c.Info().RPCURL)}
	_, twoInfo := startDevchain(t, "--chain-id", "1338", "--block-time", "100ms", "--burn-rate", "5")
	two := &chainGroup{name: "two", info: twoInfo, rpc: startProxy(t, twoInfo.RPCURL)}

	// The dev chain finalizes every 32nd block: at head 70, block 64.
	sealTo(70)
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	p := startProc(t, "replica", groupsReplicaEnv(dbURL, addr, []*chainGroup{one, two}, "RESCAN_DEPTH=0"), "poller")
	waitFor(t, 2*time.Minute, "group one's cursor at its finalized block 64", func() bool {
		return groupCursor(t, pool, one.cursorID()) == 64
	})

	amount, digest := devchain.RandomAmount(), devchain.RandomDigest()
	tx, err := c.Burn(ctx, 0, amount, digest)
	if err != nil {
		t.Fatal(err)
	}
	// The pool promotes the transaction in the background: seal until a
	// block holds it, then one more, the last the chain seals for a while.
	var burnBlock uint64
	waitFor(t, time.Minute, "the burn mined", func() bool {
		c.Seal()
		rc, err := c.Client().TransactionReceipt(ctx, tx.Hash())
		if err != nil {
			return false
		}
		burnBlock = rc.BlockNumber.Uint64()
		return true
	})
	c.Seal()
	held := head()
	if burnBlock <= 64 || held >= 96 {
		t.Fatalf("burn in block %d, head %d: the test needs both between the finalized blocks 64 and 96", burnBlock, held)
	}
	one.rpc.Set(func(f *rpcfault.Faults) { f.LagAt = &held })

	waitFor(t, time.Minute, "the burn seen at the head", func() bool {
		evs := eventsOf(t, pool, tx.Hash())
		return len(evs) == 1 && evs[0] == payments.KindSeen
	})
	// Group two's pace is measured from here.
	twoErrors := groupSample(addr, "burnpoller_polls_total", "two", "result", "error")
	twoTarget := int64(finalizedBlock(t, two.info.RPCURL)) + 32

	// The node finalizes past the held head; the head the replica sees
	// stays at N.
	sealTo(96)
	if f := finalizedBlock(t, one.info.RPCURL); f != 96 {
		t.Fatalf("the node finalized block %d, want 96", f)
	}
	waitFor(t, 2*time.Minute, fmt.Sprintf("group one's cursor at the held head %d", held), func() bool {
		return groupCursor(t, pool, one.cursorID()) == int64(held)
	})
	if one.rpc.Stats().LaggedReplies == 0 {
		t.Fatal("the proxy never held the head: the test proves nothing")
	}

	// The ledger: the one payment as sent, seen then confirmed, the cursor
	// at N with N's hash.
	rows := groupTableRows(t, pool, one.info.ChainID)
	if len(rows) != 1 || rows[0].TxHash != tx.Hash().Hex() || rows[0].Amount != amount.String() ||
		rows[0].Digest != digest.Hex() || rows[0].BlockNumber != burnBlock ||
		!strings.EqualFold(rows[0].Payer, c.Payer(0).Hex()) {
		t.Fatalf("group one's payments %v, want the burn of %s (amount %s, digest %s, block %d)", rows, tx.Hash().Hex(), amount, digest.Hex(), burnBlock)
	}
	if got := eventsOf(t, pool, tx.Hash()); len(got) != 2 || got[0] != payments.KindSeen || got[1] != payments.KindConfirmed {
		t.Fatalf("the burn's events %v, want seen then confirmed", got)
	}
	blk, err := c.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(held))
	if err != nil {
		t.Fatal(err)
	}
	var hash string
	if err := pool.QueryRow(ctx, `SELECT last_processed_hash FROM block_cursors WHERE id = $1`, one.cursorID()).Scan(&hash); err != nil {
		t.Fatal(err)
	}
	if hash != blk.Hash().Hex() {
		t.Fatalf("group one's cursor at %d with hash %s, want %s", held, hash, blk.Hash().Hex())
	}
	for _, r := range pendingRows(t, pool) {
		if r.TxHash == tx.Hash().Hex() {
			t.Fatalf("the credited burn is still pending: %v", r)
		}
	}

	// An idle chain now: the head still, the cursor at it and at the
	// target. Ready, and the metrics say so.
	waitFor(t, time.Minute, "group one's metrics at the held head", func() bool {
		for _, m := range []string{"burnpoller_head_block", "burnpoller_target_block", "burnpoller_cursor_block"} {
			if groupSample(addr, m, "one") != float64(held) {
				return false
			}
		}
		return true
	})
	checked := groupSample(addr, "burnpoller_target_checked_timestamp_seconds", "one")
	waitFor(t, time.Minute, "group one checking its target on the idle chain", func() bool {
		return groupSample(addr, "burnpoller_target_checked_timestamp_seconds", "one") > checked
	})
	if code, st := readyzStatus(t, addr); code != http.StatusOK || st.Groups["one"].Status != probe.GroupReady || st.Groups["two"].Status != probe.GroupReady {
		t.Fatalf("/readyz on an idle chain = %d %+v", code, st)
	}

	// Group two kept pace: past its finalized block of before, no failure.
	waitFor(t, 2*time.Minute, "group two past its target", func() bool {
		return groupCursor(t, pool, two.cursorID()) >= twoTarget
	})
	if v := groupSample(addr, "burnpoller_polls_total", "two", "result", "error"); v != twoErrors || math.IsNaN(v) {
		t.Fatalf("group two's failed polls went from %v to %v while one's head stood still", twoErrors, v)
	}
	stopAndCheck(t, p, pool, one, two)
}

// eventsOf are the kinds of the payment events of transaction tx, in seq
// order.
func eventsOf(t *testing.T, pool *pgxpool.Pool, tx common.Hash) []string {
	t.Helper()
	var out []string
	for _, e := range readEvents(t, pool, 0) {
		if e.row.TxHash == tx.Hex() {
			out = append(out, e.kind)
		}
	}
	return out
}
