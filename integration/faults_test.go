package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// faultRun is one poller against a dev chain with burns already mined,
// reached through fault-injecting proxies.
type faultRun struct {
	t        *testing.T
	info     devchain.Info
	pool     *pgxpool.Pool
	dbURL    string
	proxies  []*rpcfault.Proxy
	addr     string
	poller   *proc
	lastBurn uint64 // block of the last burn sent
}

// newFaultRun starts a dev chain, mines burns (single and two-burn
// transactions from several payers) and puts n proxies in front of it.
func newFaultRun(t *testing.T, n int) *faultRun {
	t.Helper()
	_, info := startDevchain(t, "--block-time", "50ms", "--payers", "4")
	pool, dbURL := pgtest.NewPool(t)
	r := &faultRun{t: t, info: info, pool: pool, dbURL: dbURL, addr: freeAddr(t)}
	for range n {
		p, err := rpcfault.Start(info.RPCURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		r.proxies = append(r.proxies, p)
	}
	r.lastBurn = sendBurns(t, info, 24, 6)
	return r
}

// sendBurns mines single burns and two-burn transactions and returns the
// highest block holding one.
func sendBurns(t *testing.T, info devchain.Info, singles, twice int) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := ethclient.DialContext(ctx, info.RPCURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := devchain.NewSender(client, info)
	if err != nil {
		t.Fatal(err)
	}
	var txs []*types.Transaction
	for i := range singles + twice {
		var tx *types.Transaction
		if i < singles {
			tx, err = s.Burn(ctx, i%s.Payers(), devchain.RandomAmount(), devchain.RandomDigest())
		} else {
			tx, err = s.BurnTwice(ctx, i%s.Payers(), devchain.RandomAmount(), devchain.RandomDigest(), devchain.RandomAmount(), devchain.RandomDigest())
		}
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		if i%8 == 7 {
			time.Sleep(150 * time.Millisecond) // spread the burns over blocks
		}
	}
	var last uint64
	for _, tx := range txs {
		rc, err := s.WaitMined(ctx, tx)
		if err != nil {
			t.Fatal(err)
		}
		last = max(last, rc.BlockNumber.Uint64())
	}
	return last
}

// startPoller runs one replica through the proxies, in order.
func (r *faultRun) startPoller(extra ...string) {
	r.t.Helper()
	var urls []string
	for _, p := range r.proxies {
		urls = append(urls, p.URL)
	}
	env := pollerEnv(r.dbURL, strings.Join(urls, ","), r.info, r.addr,
		append([]string{"MAX_BLOCK_RANGE=50", "RPC_TIMEOUT=1s", "RESCAN_DEPTH=0"}, extra...)...)
	r.poller = startProc(r.t, "poller", env, "poller")
}

// caughtUp waits until the cursor covers every burn.
func (r *faultRun) caughtUp(timeout time.Duration) {
	r.t.Helper()
	waitFor(r.t, timeout, fmt.Sprintf("cursor past block %d", r.lastBurn), func() bool {
		return cursorBlock(r.t, r.pool) >= int64(r.lastBurn)
	})
}

// finish waits until the cursor covers every burn, stops the replica (exit
// 0 required) and compares the ledger with the chain, returning its rows.
func (r *faultRun) finish(timeout time.Duration) []ledgerRow {
	r.t.Helper()
	r.caughtUp(timeout)
	r.poller.signal(syscall.SIGTERM)
	// SHUTDOWN_TIMEOUT bounds the exit; the minute is only a guard.
	if code := r.poller.wait(r.t, time.Minute); code != 0 {
		r.t.Fatalf("poller exited %d after SIGTERM", code)
	}
	rows := assertLedgerEqualsChain(r.t, r.pool, r.info.RPCURL, r.info.BurnContract, uint64(cursorBlock(r.t, r.pool)))
	if len(rows) != 36 {
		r.t.Fatalf("%d burns in the ledger, want the 36 sent", len(rows))
	}
	return rows
}

func (r *faultRun) metric(sample string) float64 {
	v, _ := scrape(r.addr, sample)
	return v
}

// pollsDone is how many poll transactions the replica at addr has finished,
// whatever their result (burnpoller_polls_total summed): a count that moves
// each time its loop goes round. ok is false if the replica did not answer.
func pollsDone(addr string) (n float64, ok bool) {
	v, err := harness.ScrapeSum(context.Background(), addr, "burnpoller_polls_total{")
	return v, err == nil
}

// waitPolls waits until the replica at addr has finished n poll
// transactions after the call: its loop went round n times since. A poll in
// flight at the call counts, so with n >= 2 a poll that began after the call
// has finished.
func waitPolls(t *testing.T, addr string, n int, what string) {
	t.Helper()
	var from float64
	waitFor(t, time.Minute, "a reading of burnpoller_polls_total", func() bool {
		v, ok := pollsDone(addr)
		from = v
		return ok
	})
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d more polls: %s", n, what), func() bool {
		v, ok := pollsDone(addr)
		return ok && v >= from+float64(n)
	})
}

// rpcErrors sums burnpoller_rpc_errors_total of one class over endpoints.
func (r *faultRun) rpcErrors(class string) float64 {
	var sum float64
	for _, p := range r.proxies {
		sum += r.metric(fmt.Sprintf(`burnpoller_rpc_errors_total{class=%q,endpoint=%q}`, class, p.URL))
	}
	return sum
}

func TestProviderRangeLimits(t *testing.T) {
	for _, style := range rpcfault.Styles {
		t.Run(string(style), func(t *testing.T) {
			t.Parallel()
			r := newFaultRun(t, 1)
			r.proxies[0].Set(func(f *rpcfault.Faults) { f.RangeLimit, f.RangeStyle = 7, style })
			// The ledger's ranges only: head tracking's own calls
			// succeed often enough that the learner probes a wider
			// range again sooner (an extra refused call, nothing
			// lost), which is not what this test counts.
			r.startPoller("PENDING=false")
			waitFor(t, 2*time.Minute, "a learned limit", func() bool {
				v, ok := scrape(r.addr, fmt.Sprintf(`burnpoller_range_limit_blocks{endpoint=%q}`, r.proxies[0].URL))
				return ok && v > 0 && v <= 7
			})
			r.finish(2 * time.Minute)
			st := r.proxies[0].Stats()
			if st.RangeRefused == 0 {
				t.Fatal("no range was refused; the fault never fired")
			}
			seen := map[[2]uint64]bool{}
			for _, rg := range st.RefusedRanges {
				if seen[rg] {
					t.Fatalf("range %v asked again after being refused (%v)", rg, st.RefusedRanges)
				}
				seen[rg] = true
			}
		})
	}
}

func TestTransportFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults func(*rpcfault.Faults)
		env    []string
		class  string
		fired  func(rpcfault.Stats) int
		check  func(t *testing.T, r *faultRun, took time.Duration)
	}{
		{"429 with Retry-After", func(f *rpcfault.Faults) { f.Throttle, f.RetryAfter = 4, 2*time.Second }, nil, "throttled",
			func(s rpcfault.Stats) int { return s.Throttled }, func(t *testing.T, r *faultRun, took time.Duration) {
				t.Helper()
				// Four throttled requests, each asking for two seconds. A
				// lower bound: a slow machine only makes the run longer.
				if took < 6*time.Second {
					t.Fatalf("caught up in %s despite four 2s Retry-After replies", took)
				}
			}},
		{"500s", func(f *rpcfault.Faults) { f.ServerErrors = 5 }, nil, "transient",
			func(s rpcfault.Stats) int { return s.ServerErrors }, nil},
		// Two of each of a hostile node's replies: huge error data, huge
		// headers, a huge error body, results of millions of tiny elements
		// (logs, receipts), an error code of millions of digits. Each is
		// one failure, retried, and all of them together cost the replica
		// less than one of them did when error data was decoded whole (334
		// MiB); a result of 7 MiB of [0,0,…] alone allocated 5,441 MiB
		// when each element was decoded before any was checked.
		{"hostile replies", func(f *rpcfault.Faults) { f.Hostile = 2 * rpcfault.HostileKinds }, nil, "transient",
			func(s rpcfault.Stats) int { return s.Hostile }, func(t *testing.T, r *faultRun, _ time.Duration) {
				t.Helper()
				if n := r.proxies[0].Stats().Hostile; n != 2*rpcfault.HostileKinds {
					t.Fatalf("%d hostile replies sent, want %d", n, 2*rpcfault.HostileKinds)
				}
				alloc := r.metric("go_memstats_alloc_bytes_total")
				t.Logf("the replica allocated %.0f MiB in all", alloc/(1<<20))
				if alloc > 64<<20 {
					t.Fatalf("the replica allocated %.0f MiB in all, want under 64", alloc/(1<<20))
				}
			}},
		{"hang past the timeout", func(f *rpcfault.Faults) { f.Hang = 3 }, nil, "transient",
			func(s rpcfault.Stats) int { return s.Hung }, nil},
		{"foreign logs", func(f *rpcfault.Faults) { f.ForeignLogs = 3 }, nil, "bad_reply",
			func(s rpcfault.Stats) int { return s.ForeignLogs }, nil},
		{"corrupted block hashes", func(f *rpcfault.Faults) { f.CorruptHashes = 3 }, nil, "bad_reply",
			func(s rpcfault.Stats) int { return s.CorruptedLogs }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newFaultRun(t, 1)
			r.proxies[0].Set(tt.faults)
			start := time.Now()
			r.startPoller(tt.env...)
			r.caughtUp(2 * time.Minute)
			took := time.Since(start)
			if n := tt.fired(r.proxies[0].Stats()); n == 0 {
				t.Fatal("the fault never fired")
			}
			if n := r.rpcErrors(tt.class); n == 0 {
				t.Fatalf("no %s errors counted in burnpoller_rpc_errors_total", tt.class)
			}
			if tt.check != nil {
				tt.check(t, r, took)
			}
			r.finish(time.Minute)
		})
	}
}

func TestMalformedLogsAreRejectedNotCredited(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.MalformedLogs = 2 })
	// The two malformed logs are injected once: a generous RPC_TIMEOUT keeps
	// a slow machine from rolling back the transaction that carries them.
	// The proxy invents them, so no receipt holds them: with the receipts
	// check on, the reply carrying one is a bad one and it is never even
	// rejected (TestForgedBurnIsNeverCredited). Off, this is the path a
	// real undecodable log of the contract takes.
	// Head tracking (PENDING) would read the blocks first, above the
	// target, and use up the injections where nothing is recorded.
	r.startPoller("MAX_BLOCK_RANGE=5", "RPC_TIMEOUT=4s", "VERIFY_RECEIPTS=false", "PENDING=false") // more replies that carry logs
	r.caughtUp(2 * time.Minute)
	// The counter moves once the commit has returned, a moment after the rows.
	waitFor(t, time.Minute, "burnpoller_rejected_logs_total = 2", func() bool {
		return r.metric("burnpoller_rejected_logs_total") == 2
	})
	r.finish(time.Minute)
	st := r.proxies[0].Stats()
	if st.MalformedLogs != 2 {
		t.Fatalf("%d malformed logs injected, want 2", st.MalformedLogs)
	}
	rows, err := r.pool.Query(context.Background(), `SELECT tx_hash FROM rejected_logs ORDER BY tx_hash`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var tx string
		if err := rows.Scan(&tx); err != nil {
			t.Fatal(err)
		}
		got = append(got, tx)
	}
	want := slices.Clone(st.MalformedTxIDs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rejected_logs = %v, want the injected %v", got, want)
	}
}

func TestLaggingEndpointHandsOverToTheNext(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 2)
	// Head tracking off: it reads above the target, where the lagging view
	// answers with blocks it does not have, and that bad reply (a hand-over
	// of its own) would race with the lag this test counts.
	r.startPoller("PENDING=false")
	waitFor(t, time.Minute, "cursor past block 20", func() bool { return cursorBlock(t, r.pool) >= 20 })
	// The first endpoint falls behind what the poller has already seen; the
	// poller must go on through the second, two finality epochs further.
	at := cursorBlock(t, r.pool)
	lag := uint64(at - 10)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.LagAt = &lag })
	waitFor(t, 2*time.Minute, "progress past the lagging view", func() bool { return cursorBlock(t, r.pool) >= at+64 })
	r.caughtUp(time.Minute)
	if v := r.metric(fmt.Sprintf(`burnpoller_endpoint_active{endpoint=%q}`, r.proxies[1].URL)); v != 1 {
		t.Fatalf("second endpoint not active (%v)", v)
	}
	if v := r.metric(fmt.Sprintf(`burnpoller_node_lagging_total{endpoint=%q}`, r.proxies[0].URL)); v == 0 {
		t.Fatal("lag not counted")
	}
	if r.proxies[0].Stats().LaggedReplies == 0 {
		t.Fatal("the lagging view never answered")
	}
	r.finish(time.Minute)
}

func TestLaggingOnlyEndpointIsNotTrustedBeyondItsView(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	r.startPoller()
	waitFor(t, time.Minute, "cursor past block 10", func() bool { return cursorBlock(t, r.pool) >= 10 })
	// The only endpoint now claims a view frozen a little above the cursor,
	// behind the finalized block already seen: the poller may go no further.
	at := uint64(cursorBlock(t, r.pool) + 3)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.LagAt = &at })
	// A transaction in flight when the view froze may still commit what it
	// fetched before. Once a poll that began after the freeze has finished,
	// the cursor has settled.
	waitPolls(t, r.addr, 2, "a whole poll after the view froze")
	settled := max(cursorBlock(t, r.pool), int64(at))
	// The real chain finalizes past it, so that only the frozen view keeps
	// the cursor there; the loop goes round, asking that view, and the
	// cursor stays put.
	waitFinalized(t, r.info.RPCURL, uint64(settled)+1)
	lagged := r.proxies[0].Stats().LaggedReplies
	waitPolls(t, r.addr, 3, "polling on under the frozen view")
	if c := cursorBlock(t, r.pool); c > settled {
		t.Fatalf("cursor %d moved beyond %d while the node's view was frozen at %d", c, settled, at)
	}
	if r.proxies[0].Stats().LaggedReplies <= lagged {
		t.Fatal("the frozen view answered nothing while the loop went round; the test proves nothing")
	}
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.LagAt = nil })
	r.finish(2 * time.Minute)
}

func TestRescanRecoversLogsALyingNodeLeftOut(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	hideAll := uint64(0)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.HideLogsAbove = &hideAll })
	// Rescans deep enough to cover the whole chain.
	r.startPoller("RESCAN_DEPTH=100000", "RESCAN_INTERVAL=1s")
	r.caughtUp(time.Minute)
	// While the node hides every log, only the burns in a range's first or
	// last block are found, through that header's bloom and the receipts.
	fromBlooms := countPayments(t, r.pool)
	if hidden := r.metric(fmt.Sprintf(`burnpoller_node_faults_total{endpoint=%q,kind="hidden_burn"}`, r.proxies[0].URL)); float64(fromBlooms) > hidden {
		t.Fatalf("%d payments while the node hides every log, %v found through blooms", fromBlooms, hidden)
	}
	if fromBlooms >= 36 {
		t.Fatalf("%d payments found through blooms: no burn is left for the rescan, the test proves nothing", fromBlooms)
	}
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.HideLogsAbove = nil })
	waitFor(t, time.Minute, "the rescan to recover every burn", func() bool { return countPayments(t, r.pool) == 36 })
	waitFor(t, time.Minute, fmt.Sprintf("burnpoller_rescan_recovered_total = %d", 36-fromBlooms), func() bool {
		return r.metric("burnpoller_rescan_recovered_total") == float64(36-fromBlooms)
	})
	r.finish(time.Minute)
}

func TestUnsupportedFinalityTagRefusesToStart(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.RejectTags = true })
	env := pollerEnv(r.dbURL, r.proxies[0].URL, r.info, r.addr)
	out, code := runPoller(t, env, "run")
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, out)
	}
	if !strings.Contains(out, "FINALITY=finalized") || !strings.Contains(out, "FINALITY=latest") {
		t.Fatalf("the error does not say which setting to use:\n%s", out)
	}
	if r.proxies[0].Stats().TagsRejected == 0 {
		t.Fatal("the fault never fired")
	}
	// With the advised setting the same node works.
	r.startPoller("FINALITY=latest", "CONFIRMATIONS=5")
	r.finish(2 * time.Minute)
}

func TestPermanentErrorFailsReadinessUntilFixed(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 1)
	r.startPoller()
	waitFor(t, time.Minute, "ready", func() bool { c, _ := readyz(r.addr); return c == 200 })
	// The provider revokes the key for a while.
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.Unauthorized = 1_000_000 })
	waitFor(t, time.Minute, "readiness to name the permanent error", func() bool {
		c, body := readyz(r.addr)
		return c == 503 && strings.Contains(body, `"node":"permanent error"`)
	})
	if r.rpcErrors("permanent") == 0 {
		t.Fatal("no permanent errors counted")
	}
	// The replica itself runs into it and says so, then retries slowly.
	waitFor(t, time.Minute, "the poller to log the permanent error", func() bool {
		return strings.Contains(r.poller.out.String(), `"class":"permanent"`)
	})
	r.proxies[0].Set(func(f *rpcfault.Faults) { f.Unauthorized = 0 })
	waitFor(t, 2*time.Minute, "ready again", func() bool { c, _ := readyz(r.addr); return c == 200 })
	r.finish(2 * time.Minute)
	if strings.Count(r.poller.out.String(), `"class":"permanent"`) > 3 {
		t.Fatal("permanent errors were retried fast rather than slowly")
	}
}
