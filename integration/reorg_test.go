package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// reorgChain is an in-process dev chain sealed by the test, so that it can
// pause, fork and roll back between blocks.
type reorgChain struct {
	t      *testing.T
	c      *devchain.Chain
	mu     sync.Mutex
	paused bool
	stop   chan struct{}
	done   chan struct{}
}

func startReorgChain(t *testing.T) *reorgChain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := &reorgChain{t: t, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
			r.mu.Lock()
			if !r.paused {
				c.Seal()
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(r.stop)
		<-r.done
		_ = c.Close()
	})
	return r
}

func (r *reorgChain) head() uint64 {
	r.t.Helper()
	n, err := r.c.Client().BlockNumber(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *reorgChain) hash(n uint64) [32]byte {
	r.t.Helper()
	h, err := r.c.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	if err != nil {
		r.t.Fatal(err)
	}
	return h.Hash()
}

// burnUntil sends burns (every third transaction a two-burn one) while the
// chain grows to head, and returns the digests sent.
func (r *reorgChain) burnUntil(head uint64) map[string]bool {
	r.t.Helper()
	ctx := context.Background()
	digests := map[string]bool{}
	for i := 0; r.head() < head; i++ {
		d1, d2 := devchain.RandomDigest(), devchain.RandomDigest()
		var err error
		if i%3 == 2 {
			_, err = r.c.BurnTwice(ctx, i%r.c.Payers(), devchain.RandomAmount(), d1, devchain.RandomAmount(), d2)
			digests[d2.Hex()] = true
		} else {
			_, err = r.c.Burn(ctx, i%r.c.Payers(), devchain.RandomAmount(), d1)
		}
		if err != nil {
			r.t.Fatal(err)
		}
		digests[d1.Hex()] = true
		time.Sleep(40 * time.Millisecond)
	}
	return digests
}

// pauseAt stops sealing once the pool is empty and the head is at least n.
func (r *reorgChain) pauseAt(n uint64) uint64 {
	r.t.Helper()
	waitFor(r.t, time.Minute, fmt.Sprintf("head %d", n), func() bool { return r.head() >= n })
	// Let the last transactions in, then stop.
	waitFor(r.t, time.Minute, "the pool empty", func() bool {
		pending, err := r.c.Client().PendingTransactionCount(context.Background())
		return err == nil && pending == 0
	})
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
	r.c.Seal()
	return r.head()
}

// forkAt makes block parent the head, drops the orphaned transactions and
// resumes sealing on the new branch.
func (r *reorgChain) forkAt(parent uint64) {
	r.t.Helper()
	ctx := context.Background()
	client := r.c.Client()
	var orphaned []common.Hash
	for n, head := parent+1, r.head(); n <= head; n++ {
		b, err := client.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			r.t.Fatal(err)
		}
		for _, tx := range b.Transactions() {
			orphaned = append(orphaned, tx.Hash())
		}
	}
	h := r.hash(parent)
	err := r.c.WithBackend(func(b *simulated.Backend) error { return b.Fork(h) })
	if err != nil {
		r.t.Fatal(err)
	}
	// The pool takes the orphaned transactions back in the background; once
	// it holds every one, drop them all, so that none is mined again.
	waitFor(r.t, time.Minute, fmt.Sprintf("the pool to take back the %d orphaned transactions", len(orphaned)), func() bool {
		for _, h := range orphaned {
			if _, pending, err := client.TransactionByHash(ctx, h); err != nil || !pending {
				return false
			}
		}
		return true
	})
	_ = r.c.WithBackend(func(b *simulated.Backend) error { b.Rollback(); return nil })
	for _, h := range orphaned {
		if _, _, err := client.TransactionByHash(ctx, h); !errors.Is(err, ethereum.NotFound) {
			r.t.Fatalf("orphaned transaction %s still known after the rollback (%v)", h.Hex(), err)
		}
	}
	r.c.ResetNonces()
	if got := r.head(); got != parent {
		r.t.Fatalf("head after fork = %d, want %d", got, parent)
	}
	r.mu.Lock()
	r.paused = false
	r.mu.Unlock()
}

// waitCursorReads waits until the poller has read its cursor row n times
// since the call, as pg_stat_activity shows: each read starts a statement
// on block_cursors in one of its sessions. While a violation is latched the
// loop does nothing else, once every POLL_INTERVAL: it reads the cursor to
// see whether an operator has reset it.
func waitCursorReads(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	ctx := context.Background()
	var since time.Time
	if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&since); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		waitFor(t, time.Minute, fmt.Sprintf("the poller to read its cursor (%d of %d)", i+1, n), func() bool {
			var latest *time.Time
			if err := pool.QueryRow(ctx, `SELECT max(query_start) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name = '`+ledgerApp+`'
				AND query ILIKE '%block_cursors%' AND query_start > $1`, since).Scan(&latest); err != nil {
				t.Fatal(err)
			}
			if latest == nil {
				return false
			}
			since = *latest
			return true
		})
	}
}

func readyz(addr string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func digestsOf(rows []ledgerRow) map[string]bool {
	out := map[string]bool{}
	for _, r := range rows {
		out[r.Digest] = true
	}
	return out
}

// TestDeepReorgBelowTheCursorLatches reorganises the chain below the
// committed cursor. The poller must stop, latch /readyz and the metric, stay
// up, credit nothing of the new branch until an operator resets the cursor,
// and then record the new branch.
func TestDeepReorgBelowTheCursorLatches(t *testing.T) {
	chain := startReorgChain(t)
	info := chain.c.Info()
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	env := pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=100ms", "MAX_BLOCK_RANGE=40")
	p := startProc(t, "poller", env, "poller")

	chain.burnUntil(100)
	head := chain.pauseAt(100)
	final := int64((head - 1) / 32 * 32)
	waitFor(t, time.Minute, fmt.Sprintf("cursor at the finalized block %d", final), func() bool { return cursorBlock(t, pool) == final })
	oldRows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(final))

	committedHash := strings.ToLower(common.Hash(chain.hash(uint64(final))).Hex())

	// Reorganise below the cursor: the new branch starts at block 80.
	chain.forkAt(79)
	newDigests := chain.burnUntil(uint64(final) + 40)

	waitFor(t, time.Minute, "the violation latched", func() bool {
		v, _ := scrape(addr, "burnpoller_finality_violation")
		return v == 1
	})
	code, body := readyz(addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, fmt.Sprintf("finality violation at block %d", final)) {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	// Latched: the loop goes round, only looking for a reset, and nothing
	// moves.
	waitCursorReads(t, pool, 3)
	if c := cursorBlock(t, pool); c != final {
		t.Fatalf("cursor moved to %d while latched", c)
	}
	if got := tableRows(t, pool); !slices.Equal(got, oldRows) {
		t.Fatalf("ledger changed after the violation: %d rows, want the %d from before", len(got), len(oldRows))
	}
	select {
	case <-p.done:
		t.Fatal("the poller exited; it must stay up for inspection")
	default:
	}
	// The log names the block and both hashes: the committed one and the
	// chain's.
	assertViolationLogged(t, p.out.String(), final, committedHash, strings.ToLower(common.Hash(chain.hash(uint64(final))).Hex()))

	// A reset while another session holds the cursor row is refused (exit
	// 2, one clear line) unless --wait is given.
	holder, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(context.Background(), `SELECT 1 FROM block_cursors WHERE id = $1 FOR UPDATE`,
		"1337:"+strings.ToLower(info.BurnContract.Hex())); err != nil {
		t.Fatal(err)
	}
	out, rc := runPoller(t, env, "cursor", "reset", "--to", "79", "--reason", "reorg below finality")
	_ = holder.Rollback(context.Background())
	if rc != 2 || !strings.Contains(out, "is locked by a running replica; retry, or pass --wait") {
		t.Fatalf("cursor reset while the row is locked exited %d:\n%s", rc, out)
	}
	if c := cursorBlock(t, pool); c != final {
		t.Fatalf("a refused reset moved the cursor to %d", c)
	}

	// The operator resets the cursor below the fork; the poller resumes on
	// the new branch.
	out, rc = runPoller(t, env, "cursor", "reset", "--to", "79", "--reason", "reorg below finality")
	if rc != 0 || !strings.Contains(out, "moved from") {
		t.Fatalf("cursor reset exited %d:\n%s", rc, out)
	}
	waitFor(t, time.Minute, "readiness back", func() bool { c, _ := readyz(addr); return c == http.StatusOK })
	waitFor(t, time.Minute, "the new branch recorded", func() bool { return cursorBlock(t, pool) >= final+32 })
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}

	cursor := uint64(cursorBlock(t, pool))
	canonical := chainBurns(t, info.RPCURL, info.BurnContract, cursor)
	var orphaned []ledgerRow // what was credited from the old branch before the violation
	for _, r := range oldRows {
		if r.BlockNumber >= 80 {
			orphaned = append(orphaned, r)
		}
	}
	want := append(slices.Clone(canonical), orphaned...)
	sortRows(want)
	got := tableRows(t, pool)
	if !slices.Equal(got, want) {
		t.Fatalf("ledger = %d rows, want %d: the canonical burns plus the %d credited from the orphaned branch before the violation",
			len(got), len(want), len(orphaned))
	}
	newOnChain := 0
	for d := range digestsOf(canonical) {
		if newDigests[d] {
			newOnChain++
		}
	}
	if len(orphaned) == 0 || newOnChain == 0 {
		t.Fatalf("the test did not exercise both branches: %d orphaned rows, %d new-branch burns", len(orphaned), newOnChain)
	}
}

// TestReorgAboveTheTargetChangesNothing reorganises blocks the poller has
// not reached (above the finalized block): the ledger ends equal to the
// canonical chain, with nothing of the orphaned blocks.
func TestReorgAboveTheTargetChangesNothing(t *testing.T) {
	chain := startReorgChain(t)
	info := chain.c.Info()
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	p := startProc(t, "poller", pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=100ms"), "poller")

	chain.burnUntil(104)
	head := chain.pauseAt(104)
	final := int64((head - 1) / 32 * 32)
	waitFor(t, time.Minute, "cursor at the finalized block", func() bool { return cursorBlock(t, pool) == final })
	// Burns above the finalized block, about to be orphaned.
	orphanedDigests := digestsOf(chainBurns(t, info.RPCURL, info.BurnContract, head))
	for d := range digestsOf(chainBurns(t, info.RPCURL, info.BurnContract, uint64(final)+2)) {
		delete(orphanedDigests, d)
	}
	if len(orphanedDigests) == 0 {
		t.Fatal("no burns above the fork point; the test would prove nothing")
	}

	chain.forkAt(uint64(final) + 2)
	chain.burnUntil(uint64(final) + 70)
	waitFor(t, time.Minute, "the cursor past the fork", func() bool { return cursorBlock(t, pool) >= final+64 })
	if v, ok := scrape(addr, "burnpoller_finality_violation"); !ok || v != 0 {
		t.Fatalf("burnpoller_finality_violation = %v (scraped: %v) after a reorg above the target, want 0", v, ok)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
	rows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursorBlock(t, pool)))
	for d := range digestsOf(rows) {
		if orphanedDigests[d] {
			t.Fatalf("burn %s of an orphaned block was credited", d)
		}
	}
}

// assertViolationLogged finds the finality-violation log line and checks
// that it names the cursor block, the committed hash and the chain's hash.
func assertViolationLogged(t *testing.T, logs string, block int64, committed, onChain string) {
	t.Helper()
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg       string `json:"msg"`
			Block     int64  `json:"block"`
			Committed string `json:"committed_hash"`
			Chain     string `json:"chain_hash"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "finality violation") {
			continue
		}
		if rec.Block != block || rec.Committed != committed || rec.Chain != onChain || committed == onChain {
			t.Fatalf("violation logged as block %d, committed %s, chain %s; want block %d, committed %s, chain %s",
				rec.Block, rec.Committed, rec.Chain, block, committed, onChain)
		}
		return
	}
	t.Fatalf("no finality violation log line in:\n%s", logs)
}

// forkKeepingTransactions makes block parent the head and lets the pool
// re-include the orphaned transactions on the new branch, at new positions.
func (r *reorgChain) forkKeepingTransactions(parent uint64) {
	r.t.Helper()
	h := r.hash(parent)
	if err := r.c.WithBackend(func(b *simulated.Backend) error { return b.Fork(h) }); err != nil {
		r.t.Fatal(err)
	}
	if got := r.head(); got != parent {
		r.t.Fatalf("head after fork = %d, want %d", got, parent)
	}
	r.mu.Lock()
	r.paused = false
	r.mu.Unlock()
}

// TestReorgUnderABackfillAboveTheLiveCursorLatches: a backfill records
// blocks above the live cursor; the chain then reorganises below the
// finalized block and re-includes the backfilled burns at new positions.
// The live loop, reaching those blocks, must not insert the re-included
// burns under their new keys (each would be credited twice): it latches a
// finality violation, commits nothing, logs both sides and stays up.
func TestReorgUnderABackfillAboveTheLiveCursorLatches(t *testing.T) {
	chain := startReorgChain(t)
	info := chain.c.Info()
	pool, dbURL := pgtest.NewPool(t)
	addr := freeAddr(t)
	env := pollerEnv(dbURL, info.RPCURL, info, addr, "POLL_INTERVAL=100ms", "START_BLOCK=40")

	chain.burnUntil(100)
	chain.pauseAt(100)
	final := finalizedBlock(t, info.RPCURL)
	if final < 64 {
		t.Fatalf("finalized block %d, want at least 64", final)
	}
	out, code := runPoller(t, env, "backfill", "--from", "40", "--to", "64")
	if code != 0 {
		t.Fatalf("backfill exited %d:\n%s", code, out)
	}
	backfilled := tableRows(t, pool)
	var moved []ledgerRow
	for _, r := range backfilled {
		if r.BlockNumber > 50 {
			moved = append(moved, r)
		}
	}
	if len(moved) == 0 {
		t.Fatal("no backfilled burn above the fork point; the test would prove nothing")
	}

	// Reorganise from block 51, below the finalized block, keeping the
	// transactions: they land on the new branch under new keys.
	chain.forkKeepingTransactions(50)
	chain.burnUntil(uint64(final) + 40)
	reincluded := 0
	onChain := map[string]ledgerRow{}
	for _, r := range chainBurns(t, info.RPCURL, info.BurnContract, chain.head()) {
		onChain[r.TxHash] = r
	}
	for _, r := range moved {
		if c, ok := onChain[r.TxHash]; ok && (c.BlockNumber != r.BlockNumber || c.LogIndex != r.LogIndex) {
			reincluded++
		}
	}
	if reincluded == 0 {
		t.Fatal("no backfilled burn was re-included at another position; the test would prove nothing")
	}
	waitFinalized(t, info.RPCURL, 96)

	// The live replica starts at block 40 and reaches the backfilled blocks.
	p := startProc(t, "poller", env, "poller")
	waitFor(t, time.Minute, "the violation latched", func() bool {
		v, _ := scrape(addr, "burnpoller_finality_violation")
		return v == 1
	})
	code, body := readyz(addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "finality violation at block") {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	// Nothing of the violating range was committed: the ledger is what the
	// backfill recorded, each burn once.
	if got := tableRows(t, pool); !slices.Equal(got, backfilled) {
		t.Fatalf("ledger changed after the violation: %d rows, want the backfill's %d\n%v", len(got), len(backfilled), diffRows(got, backfilled))
	}
	if c := cursorBlock(t, pool); c > 50 {
		t.Fatalf("the live cursor advanced to %d past the reorganised blocks", c)
	}
	select {
	case <-p.done:
		t.Fatal("the poller exited; it must stay up for inspection")
	default:
	}
	// The log line has both sides: the ledger's row and the chain's.
	found := false
	for line := range strings.Lines(p.out.String()) {
		var rec struct {
			Msg    string `json:"msg"`
			Block  int64  `json:"block"`
			Ledger struct {
				Tx        string `json:"tx"`
				LogIndex  uint   `json:"log_index"`
				Block     int64  `json:"block"`
				BlockHash string `json:"block_hash"`
				Amount    string `json:"amount"`
			} `json:"ledger"`
			Committed string `json:"committed_hash"`
			Chain     string `json:"chain_hash"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "finality violation") {
			continue
		}
		found = true
		var row *ledgerRow
		for i := range backfilled {
			if backfilled[i].TxHash == rec.Ledger.Tx && backfilled[i].LogIndex == rec.Ledger.LogIndex {
				row = &backfilled[i]
			}
		}
		if row == nil || int64(row.BlockNumber) != rec.Ledger.Block || row.BlockHash != rec.Ledger.BlockHash ||
			row.Amount != rec.Ledger.Amount || rec.Block != rec.Ledger.Block || rec.Committed != row.BlockHash ||
			rec.Chain == "" || rec.Chain == rec.Committed {
			t.Fatalf("violation logged as %+v; want a backfilled row and the chain's other hash", rec)
		}
	}
	if !found {
		t.Fatalf("no finality violation log line in:\n%s", p.out.String())
	}
}
