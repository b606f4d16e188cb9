package devchain_test

import (
	"context"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
)

// TestBurnsOverJSONRPC sends burns through a Sender over real HTTP JSON-RPC
// and reads back exactly the logs the contract must emit.
func TestBurnsOverJSONRPC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", BlockTime: 50 * time.Millisecond, Payers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info := c.Info()
	client, err := ethclient.DialContext(ctx, info.RPCURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if id, err := client.ChainID(ctx); err != nil || id.Uint64() != 1337 {
		t.Fatalf("chain id = %v, %v", id, err)
	}
	s, err := devchain.NewSender(client, info)
	if err != nil {
		t.Fatal(err)
	}
	big1 := new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)
	d1, d2, d3 := devchain.RandomDigest(), devchain.RandomDigest(), devchain.RandomDigest()
	tx1, err := s.Burn(ctx, 1, big1, d1)
	if err != nil {
		t.Fatal(err)
	}
	tx2, err := s.BurnTwice(ctx, 2, big.NewInt(7), d2, big.NewInt(9), d3)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.WaitMined(ctx, tx2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitMined(ctx, tx1); err != nil {
		t.Fatal(err)
	}
	// A zero amount reverts.
	if tx, err := s.Burn(ctx, 0, big.NewInt(0), d1); err == nil {
		if _, err := s.WaitMined(ctx, tx); err == nil {
			t.Fatal("burn of 0 succeeded")
		}
	}

	logs, err := client.FilterLogs(ctx, ethereum.FilterQuery{
		ToBlock: r2.BlockNumber, Addresses: []common.Address{info.BurnContract}, Topics: [][]common.Hash{{chain.BurnTopic}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[common.Hash]string{}
	for _, l := range logs {
		b, err := chain.DecodeBurn(l)
		if err != nil {
			t.Fatal(err)
		}
		got[b.Digest] = b.Payer.Hex() + " " + b.Amount.String()
	}
	want := map[common.Hash]string{
		d1: s.Payer(1).Hex() + " " + big1.String(),
		d2: info.BatchBurner.Hex() + " 7",
		d3: info.BatchBurner.Hex() + " 9",
	}
	if len(got) != len(want) {
		t.Fatalf("burns = %v, want %v", got, want)
	}
	for d, w := range want {
		if got[d] != w {
			t.Errorf("burn %s = %q, want %q", d.Hex(), got[d], w)
		}
	}
}

// TestContractAddressesAreFixed guards docker-compose.yml and the README,
// which name the burn contract the default deployer key creates.
func TestContractAddressesAreFixed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const want = "0x4b352ded1403ef22eb738f2ef72cef4349648fd9"
	if got := strings.ToLower(c.Info().BurnContract.Hex()); got != want {
		t.Fatalf("burn contract at %s, want %s", got, want)
	}
	for _, file := range []string{"../docker-compose.yml", "../README.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not name the burn contract %s", file, want)
		}
	}
}

// TestReorgReplacesTheLastBlocks: Reorg forks below the head, and the
// dropped transactions are sealed again into the new branch: the burn's
// log moves to another block, the old block hash leaves the chain.
func TestReorgReplacesTheLastBlocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := c.Client()
	tx, err := c.Burn(ctx, 0, big.NewInt(7), common.HexToHash("0xd1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Seal()
	before, err := client.TransactionReceipt(ctx, tx.Hash())
	if err != nil {
		t.Fatal(err)
	}
	c.Seal()
	head, _ := client.BlockNumber(ctx)
	parent, n, err := c.Reorg(ctx, 2)
	if err != nil || parent != head-2 || n != 1 {
		t.Fatalf("Reorg = %d, %d, %v; want parent %d and the burn back in the pool", parent, n, err, head-2)
	}
	if got, _ := client.BlockNumber(ctx); got != parent {
		t.Fatalf("head after the fork %d, want %d", got, parent)
	}
	c.Seal() // the new branch: the burn again, in a block of another hash
	c.Seal()
	after, err := client.TransactionReceipt(ctx, tx.Hash())
	if err != nil {
		t.Fatal(err)
	}
	burns := 0
	for _, l := range after.Logs {
		if l.Topics[0] == chain.BurnTopic && l.BlockHash == after.BlockHash {
			burns++
		}
	}
	if after.BlockHash == before.BlockHash || burns != 1 {
		t.Fatalf("after the reorg the burn is in block %d (%s, %d burn logs), before in %d (%s)", after.BlockNumber, after.BlockHash, burns, before.BlockNumber, before.BlockHash)
	}
	old, err := client.HeaderByNumber(ctx, before.BlockNumber)
	if err != nil || old.Hash() == before.BlockHash {
		t.Fatalf("block %d still has the old hash (%v)", before.BlockNumber, err)
	}
}
