package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/contracts/bindings"
	"github.com/burnpoller/burnpoller/devchain"
)

// secondContract deploys another contract that emits LogBurnWithDigest
// (EventImpostor) and returns it with the block it was deployed in, and a
// function that emits n such events from several payers and returns the
// highest block holding one.
func secondContract(t *testing.T, info devchain.Info) (common.Address, uint64, func(n int) uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := ethclient.DialContext(ctx, info.RPCURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	s, err := devchain.NewSender(client, info)
	if err != nil {
		t.Fatal(err)
	}
	var addr common.Address
	tx, err := s.Transact(ctx, 0, 1_000_000, func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
		addr, tx, _, err = bindings.DeployEventImpostor(o, client)
		return tx, err
	})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.WaitMined(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bindings.NewEventImpostor(addr, client)
	if err != nil {
		t.Fatal(err)
	}
	emit := func(n int) uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.ResetNonces() // sendBurns' sender used the same payers meanwhile
		var txs []*types.Transaction
		for i := range n {
			tx, err := s.Transact(ctx, i%s.Payers(), 200_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
				return c.FakeBurn(o, devchain.RandomAmount(), devchain.RandomDigest())
			})
			if err != nil {
				t.Fatal(err)
			}
			txs = append(txs, tx)
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
	return addr, rc.BlockNumber.Uint64(), emit
}

// assertContractLedger compares the payments of contract with the chain's
// burns of contract up to block to, row by row.
func assertContractLedger(t *testing.T, pool *pgxpool.Pool, rpcURL string, contract common.Address, to uint64) []ledgerRow {
	t.Helper()
	want := chainBurns(t, rpcURL, contract, to)
	var got []ledgerRow
	for _, r := range tableRowsOf(t, pool, contract) {
		if r.BlockNumber <= to {
			got = append(got, r)
		}
	}
	if len(got) != len(want) || len(diffRows(want, got)) > 0 || len(diffRows(got, want)) > 0 {
		t.Fatalf("ledger of contract %s differs from the chain up to block %d: %d rows, want %d\nmissing: %v\nextra: %v",
			contract.Hex(), to, len(got), len(want), firstN(diffRows(want, got), 10), firstN(diffRows(got, want), 10))
	}
	return want
}

func tableRowsOf(t *testing.T, pool *pgxpool.Pool, contract common.Address) []ledgerRow {
	t.Helper()
	var out []ledgerRow
	for _, r := range tableRows(t, pool) {
		var c string
		if err := pool.QueryRow(context.Background(), `SELECT contract FROM payments WHERE tx_hash = $1 AND log_index = $2`,
			r.TxHash, int32(r.LogIndex)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		if c == strings.ToLower(contract.Hex()) {
			out = append(out, r)
		}
	}
	return out
}

// TestSeveralContractsInOneGroup: a group follows two contracts with one
// cursor and one filter. A contract added to a running group whose cursor
// is past the contract's first block has its history below the cursor
// backfilled on its own, with readiness saying so until it is complete, so
// no burn is missed; a replica that still lists only the first contract
// refuses to write (it would leave the second one's burns out) until told
// the removal is meant.
func TestSeveralContractsInOneGroup(t *testing.T) {
	t.Parallel()
	r := newFaultRun(t, 0)
	a := r.info.BurnContract
	b, deployedAt, emit := secondContract(t, r.info)
	lastB := emit(10)

	// The group follows A alone, past every burn of both.
	first := startProc(t, "replica-a", pollerEnv(r.dbURL, r.info.RPCURL, r.info, r.addr, "MAX_BLOCK_RANGE=20"), "poller")
	r.lastBurn = max(r.lastBurn, lastB)
	r.caughtUp(2 * time.Minute)
	if rows := tableRowsOf(t, r.pool, b); len(rows) != 0 {
		t.Fatalf("%d payments of the second contract before it was configured", len(rows))
	}

	// A rolling update: a replica that follows both joins the running one.
	// B's history below the cursor it joins at is backfilled from its first
	// block; the old replica, lacking B, stands by from then on.
	addr := freeAddr(t)
	both := fmt.Sprintf("BURN_CONTRACT=%s,%s@%d", a.Hex(), strings.ToLower(b.Hex()), deployedAt)
	second := startProc(t, "replica-ab", pollerEnv(r.dbURL, r.info.RPCURL, r.info, addr, both, "MAX_BLOCK_RANGE=20"), "poller")
	var liveFrom, firstBlock int64
	waitFor(t, 2*time.Minute, "B recorded in the group", func() bool {
		err := r.pool.QueryRow(context.Background(), `SELECT live_from, first_block FROM group_contracts WHERE contract = $1`,
			strings.ToLower(b.Hex())).Scan(&liveFrom, &firstBlock)
		return err == nil
	})
	if firstBlock != int64(deployedAt) || liveFrom <= int64(lastB) {
		t.Fatalf("B followed from %d with history from %d; want history from %d and its burns (up to %d) below", liveFrom, firstBlock, deployedAt, lastB)
	}
	waitFor(t, time.Minute, "the old replica refusing to write", func() bool {
		c, body := readyz(r.addr)
		return c == http.StatusServiceUnavailable && strings.Contains(body, "BURN_CONTRACT lacks a contract the group follows")
	})
	// More of both while the history is read.
	r.lastBurn = max(sendBurns(t, r.info, 6, 2), emit(6))
	waitFor(t, 2*time.Minute, "the cursor past the new burns and B's history complete", func() bool {
		var pending int
		if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM group_contracts WHERE backfilled_at IS NULL`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		return pending == 0 && cursorBlock(t, r.pool) >= int64(r.lastBurn)
	})
	waitFor(t, time.Minute, "readiness", func() bool { c, _ := readyz(addr); return c == http.StatusOK })
	if v, ok := scrape(addr, fmt.Sprintf(`burnpoller_contract_backfill_remaining_blocks{contract=%q}`, strings.ToLower(b.Hex()))); !ok || v != 0 {
		t.Fatalf("burnpoller_contract_backfill_remaining_blocks = %v (%v), want 0", v, ok)
	}
	for _, p := range []*proc{first, second} {
		p.signal(syscall.SIGTERM)
		if c := p.wait(t, time.Minute); c != 0 {
			t.Fatalf("%s exited %d", p.name, c)
		}
	}

	to := uint64(cursorBlock(t, r.pool))
	rowsA := assertContractLedger(t, r.pool, r.info.RPCURL, a, to)
	rowsB := assertContractLedger(t, r.pool, r.info.RPCURL, b, to)
	if len(rowsA) != 36+10 || len(rowsB) != 16 {
		t.Fatalf("%d payments of A and %d of B, want 46 and 16", len(rowsA), len(rowsB))
	}
	if all := tableRows(t, r.pool); len(all) != len(rowsA)+len(rowsB) {
		t.Fatalf("%d payments in all, want %d", len(all), len(rowsA)+len(rowsB))
	}
}
