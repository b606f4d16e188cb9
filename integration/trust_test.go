package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// The tests here run the poller against nodes that lie: a node inventing
// burns, one hiding them, two that disagree, and one that pruned its
// history. Each ends with the ledger compared row by row with the chain.

// forgedInPayments counts the payments whose transaction is one of txs.
func forgedInPayments(t *testing.T, r *faultRun, txs []string) int {
	t.Helper()
	lower := make([]string, len(txs))
	for i, tx := range txs {
		lower[i] = strings.ToLower(tx)
	}
	var n int
	if err := r.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM payments WHERE lower(tx_hash) = ANY($1)`, lower).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// burnBlocks returns the distinct blocks holding the chain's burns up to
// block to, ascending.
func burnBlocks(t *testing.T, r *faultRun) []uint64 {
	t.Helper()
	var blocks []uint64
	for _, row := range chainBurns(t, r.info.RPCURL, r.info.BurnContract, r.lastBurn) {
		if !slices.Contains(blocks, row.BlockNumber) {
			blocks = append(blocks, row.BlockNumber)
		}
	}
	slices.Sort(blocks)
	if len(blocks) == 0 {
		t.Fatal("no burns on the chain")
	}
	return blocks
}

func TestForgedBurnIsNeverCredited(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	p := r.proxies[0]
	p.Set(func(f *rpcfault.Faults) { f.ForgeBurns = 3 })
	// Head tracking reads logs too: without it every forgery lands in a
	// reply the ledger asked for. VERIFY_RECEIPTS is left at its default.
	r.startPoller("PENDING=false")
	r.caughtUp(time.Minute)
	sample := fmt.Sprintf(`burnpoller_node_faults_total{endpoint=%q,kind="unconfirmed_burn"}`, p.URL)
	waitFor(t, 30*time.Second, sample+" >= 1", func() bool { return r.metric(sample) >= 1 })
	faults := r.metric(sample) // read before finish stops the replica
	r.finish(30 * time.Second)
	st := p.Stats()
	if st.ForgedLogs != 3 || len(st.ForgedTxIDs) != 3 {
		t.Fatalf("%d burns forged (%v), want 3", st.ForgedLogs, st.ForgedTxIDs)
	}
	if n := forgedInPayments(t, r, st.ForgedTxIDs); n != 0 {
		t.Fatalf("%d forged burns credited", n)
	}
	if faults < 1 || faults > 3 {
		t.Fatalf("%s = %v, want 1 to 3 (one per forged reply read)", sample, faults)
	}
}

func TestQuorumOutvotesALyingEndpoint(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 3)
	liar := r.proxies[1]
	// Receipts would catch the forgeries by themselves: with them off, only
	// the quorum stands between the lying endpoint and the ledger.
	liar.Set(func(f *rpcfault.Faults) { f.ForgeBurns = 1_000_000 })
	r.startPoller("RPC_QUORUM=2", "VERIFY_RECEIPTS=false", "PENDING=false")
	disagreements := func(p *rpcfault.Proxy) float64 {
		return r.metric(fmt.Sprintf(`burnpoller_quorum_disagreements_total{endpoint=%q}`, p.URL))
	}
	waitFor(t, 45*time.Second, "the lying endpoint outvoted", func() bool { return disagreements(liar) >= 1 })
	r.caughtUp(45 * time.Second)
	// Read before finish stops the replica.
	counted := make([]float64, len(r.proxies))
	for i, p := range r.proxies {
		counted[i] = disagreements(p)
	}
	r.finish(30 * time.Second)
	st := liar.Stats()
	if st.ForgedLogs == 0 {
		t.Fatal("the lying endpoint forged nothing; the test proves nothing")
	}
	if n := forgedInPayments(t, r, st.ForgedTxIDs); n != 0 {
		t.Fatalf("%d forged burns credited", n)
	}
	for i, p := range r.proxies {
		v := counted[i]
		switch {
		case p == liar && v < 1:
			t.Errorf("endpoint %d (the liar): %v disagreements counted, want >= 1", i, v)
		case p != liar && v != 0:
			t.Errorf("endpoint %d (honest): %v disagreements counted, want 0", i, v)
		}
	}
}

func TestQuorumHoldsWhenTwoEndpointsDisagree(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 2)
	liar := r.proxies[1]
	liar.Set(func(f *rpcfault.Faults) { f.ForgeBurns = 1_000_000 })
	first := burnBlocks(t, r)[0]
	r.startPoller("RPC_QUORUM=2", "VERIFY_RECEIPTS=false", "PENDING=false")
	var body string
	waitFor(t, 30*time.Second, "readiness to report the split quorum", func() bool {
		var code int
		code, body = readyz(r.addr)
		return code == 503 && strings.Contains(body, `"node":"quorum not reached`)
	})
	// Once polls that began after that have finished, the cursor has had
	// every chance to move.
	waitPolls(t, r.addr, 3, "polling on while the endpoints disagree")
	if c := cursorBlock(t, r.pool); c >= int64(first) {
		t.Fatalf("cursor at %d, past block %d, the first holding burns, while the endpoints disagree", c, first)
	}
	if n := countPayments(t, r.pool); n != 0 {
		t.Fatalf("%d payments credited while the endpoints disagree", n)
	}
	if c, b := readyz(r.addr); c != 503 || !strings.Contains(b, "quorum") {
		t.Fatalf("readiness %d %s while the endpoints still disagree", c, b)
	}
	if liar.Stats().ForgedLogs == 0 {
		t.Fatal("nothing was forged; the test proves nothing")
	}
	liar.Set(func(f *rpcfault.Faults) { f.ForgeBurns = 0 })
	r.caughtUp(45 * time.Second)
	waitFor(t, 30*time.Second, "ready once the endpoints agree", func() bool { c, _ := readyz(r.addr); return c == 200 })
	r.finish(30 * time.Second)
	if n := forgedInPayments(t, r, liar.Stats().ForgedTxIDs); n != 0 {
		t.Fatalf("%d forged burns credited", n)
	}
}

func TestPrunedHistoryMovesToAnArchiveEndpoint(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 2)
	pruned, archive := r.proxies[0], r.proxies[1]
	blocks := burnBlocks(t, r)
	if len(blocks) < 2 {
		t.Fatalf("the burns fell in %d block(s); the test needs some below and some above the pruning point", len(blocks))
	}
	below := blocks[len(blocks)/2] // burns lie below it and at or above it
	pruned.Set(func(f *rpcfault.Faults) { f.PrunedBelow = &below })
	r.startPoller()
	r.finish(45 * time.Second)

	pst, ast := pruned.Stats(), archive.Stats()
	if pst.PrunedReplies == 0 {
		t.Fatal("the pruned endpoint never refused a range")
	}
	for _, rg := range pst.ServedRanges {
		if rg[0] < below {
			t.Fatalf("the pruned endpoint served [%d, %d], below block %d", rg[0], rg[1], below)
		}
	}
	for _, b := range blocks {
		if b >= below {
			continue
		}
		if !slices.ContainsFunc(ast.ServedRanges, func(rg [2]uint64) bool { return rg[0] <= b && b <= rg[1] }) {
			t.Fatalf("block %d (burns, pruned) was not read from the archive endpoint; it served %v", b, ast.ServedRanges)
		}
	}

	// The pruned endpoint alone, for a new group (its own database) that
	// starts at the first burn: nobody serves that history.
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	start := blocks[0]
	env := pollerEnv(dbURL, pruned.URL, r.info, addr,
		"MAX_BLOCK_RANGE=50", "RPC_TIMEOUT=1s", "RESCAN_DEPTH=0", "START_BLOCK="+strconv.FormatUint(start, 10))
	alone := startProc(t, "poller-pruned", env, "poller")
	wantReady := fmt.Sprintf(`"node":"history not served: block %d needs an archive endpoint"`, start)
	waitFor(t, 30*time.Second, "readiness to say which block needs an archive endpoint", func() bool {
		c, body := readyz(addr)
		return c == 503 && strings.Contains(body, wantReady)
	})
	// The poller backs off after such a poll (30 s): the failed poll it
	// counted is the one whose transaction rolled back.
	waitFor(t, 30*time.Second, "a failed poll", func() bool {
		v, ok := scrape(addr, `burnpoller_polls_total{result="error"}`)
		return ok && v >= 1
	})
	if v, _ := scrape(addr, `burnpoller_polls_total{result="committed"}`); v != 0 {
		t.Fatalf("%v polls committed with only a pruned endpoint", v)
	}
	if c := cursorBlock(t, pool); c >= int64(start) || c >= int64(below) {
		t.Fatalf("cursor at %d with only a pruned endpoint (pruned below %d, start %d)", c, below, start)
	}
	if n := countPayments(t, pool); n != 0 {
		t.Fatalf("%d payments without anybody serving the history", n)
	}
	if c, body := readyz(addr); c != 503 || !strings.Contains(body, wantReady) {
		t.Fatalf("readiness %d %s, want 503 with %s", c, body, wantReady)
	}
	logLine := regexp.MustCompile(`(?m)^.*"level":"ERROR".*archive.*"block":` + strconv.FormatUint(start, 10) + `[,}].*$`)
	waitFor(t, 10*time.Second, "an error log naming the block and the archive endpoint it needs", func() bool {
		return logLine.MatchString(alone.out.String())
	})
}

// TestHiddenBurnsAreRecoveredFromReceipts: a node that answers every
// eth_getLogs with [] while its headers and receipts stay honest. The bloom
// of every header a range holds (its first and last block) is resolved
// through the receipts, so with one-block ranges every burn is found,
// recorded from its receipt and counted as hidden_burn. (Burns hidden in
// the middle of longer ranges are the rescans' and the quorum's:
// TestRescanRecoversLogsALyingNodeLeftOut, TestQuorumOutvotesALyingEndpoint.)
func TestHiddenBurnsAreRecoveredFromReceipts(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	p := r.proxies[0]
	p.Set(func(f *rpcfault.Faults) { f.HideAllLogs = 1_000_000 })
	r.startPoller("PENDING=false", "MAX_BLOCK_RANGE=1")
	r.caughtUp(45 * time.Second)
	sample := fmt.Sprintf(`burnpoller_node_faults_total{endpoint=%q,kind="hidden_burn"}`, p.URL)
	hidden := r.metric(sample) // counted before the commit; read before finish stops the replica
	r.finish(30 * time.Second)
	if st := p.Stats(); st.HiddenLogs == 0 {
		t.Fatal("no log was hidden; the test proves nothing")
	}
	// A range retried after a failure counts its hidden burns again.
	if hidden < 36 {
		t.Fatalf("%s = %v, want at least the 36 burns hidden", sample, hidden)
	}
}
