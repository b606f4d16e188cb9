package integration

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/contracts/bindings"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

const getLogsOK = `burnpoller_rpc_requests_total{method="eth_getLogs",result="ok"}`

func countPayments(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// cursorBlock is the cursor, or -2 before a replica has seeded it.
func cursorBlock(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT last_processed_block FROM block_cursors WHERE id NOT LIKE 'backfill:%'`).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return -2
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestThreeReplicasRecordEveryBurnExactlyOnce runs three replicas against a
// dev chain with continuous burn traffic (single burns, two-burn BatchBurner
// transactions and an impostor contract emitting the same event), SIGKILLs
// the lock holder and SIGTERMs another mid-run, and then requires the
// payments table to equal the chain's burn logs exactly.
func TestThreeReplicasRecordEveryBurnExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	_, info := startDevchain(t, "--block-time", "100ms", "--payers", "6")
	pool, dbURL := pgtest.NewPool(t)
	auditCursor(t, pool)
	rec := startRecorder(t, info.RPCURL, 100*time.Millisecond)

	client, err := ethclient.DialContext(ctx, info.RPCURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sender, err := devchain.NewSender(client, info)
	if err != nil {
		t.Fatal(err)
	}

	// An impostor contract emits the same event; none of its logs may be credited.
	var impostor *bindings.EventImpostor
	tx, err := sender.Transact(ctx, 0, 2_000_000, func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
		_, tx, impostor, err = bindings.DeployEventImpostor(o, client)
		return tx, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.WaitMined(ctx, tx); err != nil {
		t.Fatal(err)
	}

	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var traffic sync.WaitGroup
	traffic.Go(func() {
		sender.Traffic(trafficCtx, 30, func(err error) { t.Logf("sending burn: %v", err) })
	})
	traffic.Go(func() {
		for i := 0; trafficCtx.Err() == nil; i++ {
			_, _ = sender.Transact(trafficCtx, i%sender.Payers(), 300_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
				return impostor.FakeBurn(o, big.NewInt(1_000_000), devchain.RandomDigest())
			})
			time.Sleep(500 * time.Millisecond)
		}
	})
	defer func() { stopTraffic(); traffic.Wait() }()

	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	replicas := make([]*proc, 3)
	// Keep the latest eth_getLogs count each replica process reported.
	var (
		mu      sync.Mutex
		gens    = make([]int, 3)
		getLogs = map[string]float64{}
	)
	start := func(i int, gen int) {
		// No rescans here: they re-read committed blocks on purpose, and this
		// test proves the commit path never does.
		p := startProc(t, fmt.Sprintf("poller-%d.%d", i, gen), pollerEnv(dbURL, rec.URL, info, addrs[i], "MAX_BLOCK_RANGE=4", "RESCAN_DEPTH=0"), "poller")
		mu.Lock()
		defer mu.Unlock()
		replicas[i], gens[i] = p, gen
	}
	for i := range replicas {
		start(i, 0)
	}
	for i, addr := range addrs {
		waitFor(t, time.Minute, fmt.Sprintf("replica %d ready", i), func() bool { return httpStatus("http://"+addr+"/readyz") == 200 })
	}

	scrapeAll := func() {
		for i, addr := range addrs {
			if v, ok := scrape(addr, getLogsOK); ok {
				mu.Lock()
				getLogs[fmt.Sprintf("%d.%d", i, gens[i])] = v
				mu.Unlock()
			}
		}
	}
	scraperCtx, stopScraper := context.WithCancel(ctx)
	var scraper sync.WaitGroup
	scraper.Go(func() {
		for scraperCtx.Err() == nil {
			scrapeAll()
			time.Sleep(100 * time.Millisecond)
		}
	})

	waitFor(t, 2*time.Minute, "120 payments", func() bool { return countPayments(t, pool) >= 120 })

	// SIGKILL the lock holder mid-run, then bring it back.
	holder := 0
	waitFor(t, time.Minute, "a replica holding the lock", func() bool {
		for i, addr := range addrs {
			if v, ok := scrape(addr, "burnpoller_lock_held"); ok && v == 1 {
				holder = i
				return true
			}
		}
		return false
	})
	replicas[holder].signal(syscall.SIGKILL)
	replicas[holder].wait(t, time.Minute)
	t.Logf("SIGKILLed replica %d at %d payments", holder, countPayments(t, pool))
	start(holder, 1)

	waitFor(t, 2*time.Minute, "220 payments", func() bool { return countPayments(t, pool) >= 220 })

	// SIGTERM another replica: it must exit 0. SHUTDOWN_TIMEOUT bounds
	// that; the minute's wait is only a guard.
	other := (holder + 1) % 3
	replicas[other].signal(syscall.SIGTERM)
	if code := replicas[other].wait(t, time.Minute); code != 0 {
		t.Fatalf("SIGTERMed replica %d exited %d, want 0", other, code)
	}
	t.Logf("SIGTERMed replica %d at %d payments", other, countPayments(t, pool))

	waitFor(t, 2*time.Minute, "330 payments", func() bool { return countPayments(t, pool) >= 330 })
	stopTraffic()
	traffic.Wait()
	stopScraper()
	scraper.Wait()
	scrapeAll()

	for i, r := range replicas {
		if i == other {
			continue
		}
		if v, ok := scrape(addrs[i], "burnpoller_payments_duplicate_total"); !ok || v != 0 {
			t.Errorf("replica %d: burnpoller_payments_duplicate_total = %v (scraped %v), want 0", i, v, ok)
		}
		r.signal(syscall.SIGTERM)
		if code := r.wait(t, time.Minute); code != 0 {
			t.Errorf("replica %d exited %d after SIGTERM, want 0", i, code)
		}
	}

	cursor := cursorBlock(t, pool)
	rows := assertLedgerEqualsChain(t, pool, info.RPCURL, info.BurnContract, uint64(cursor))

	// The ledger covers what the test meant to exercise.
	payers, perTx := map[string]bool{}, map[string]int{}
	for _, r := range rows {
		payers[r.Payer] = true
		perTx[r.TxHash]++
	}
	twoBurnTxs := 0
	for _, n := range perTx {
		if n == 2 {
			twoBurnTxs++
		}
	}
	if len(rows) < 300 || len(payers) < 4 || twoBurnTxs < 10 {
		t.Fatalf("ledger too thin: %d burns, %d payers, %d two-burn transactions", len(rows), len(payers), twoBurnTxs)
	}
	var foreign int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE contract <> lower($1)`, info.BurnContract.Hex()).Scan(&foreign); err != nil {
		t.Fatal(err)
	}
	if foreign != 0 {
		t.Fatalf("%d payments from another contract", foreign)
	}

	// The cursor only ever moved forward, in contiguous, non-overlapping ranges.
	committed := committedRanges(t, pool)
	prev := int64(-1)
	for _, m := range committed {
		if m.Old != prev || m.New <= m.Old {
			t.Fatalf("cursor move %d -> %d after %d: ranges overlap, skip or go backwards", m.Old, m.New, prev)
		}
		prev = m.New
	}
	if prev != cursor {
		t.Fatalf("audited cursor ends at %d, table says %d", prev, cursor)
	}

	// eth_getLogs was never asked for a range already committed; only ranges
	// whose transaction did not commit (the SIGKILLed holder's) were asked again.
	requested := rec.getLogsRanges()
	assertNoCommittedRangeRequested(t, requested, committed)
	var fromMetrics float64
	for _, v := range getLogs {
		fromMetrics += v
	}
	// The replicas' own counts agree: never more calls than the proxy saw
	// (a stopped replica's last calls may postdate its last scrape).
	if fromMetrics < 1 || fromMetrics > float64(len(requested)) {
		t.Fatalf("replicas' metrics count %v eth_getLogs calls; the proxy saw %d for %d committed ranges",
			fromMetrics, len(requested), len(committed))
	}
	t.Logf("%d burns in %d committed ranges; %d eth_getLogs calls (metrics: %v)",
		len(rows), len(committed), len(requested), fromMetrics)
}
