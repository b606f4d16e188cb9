// Command devchain runs a real go-ethereum node in-process with the burn
// contracts deployed, for demos and tests. When ready it prints one JSON line
// on stdout describing the chain; SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	gethlog "github.com/ethereum/go-ethereum/log"

	"github.com/burnpoller/burnpoller/devchain"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("devchain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8545", "host:port for HTTP JSON-RPC (port 0 picks a free port)")
	blockTime := fs.Duration("block-time", time.Second, "seal a block this often")
	burnRate := fs.Float64("burn-rate", 0, "send this many burns per second from random payers (0: none)")
	chainID := fs.Uint64("chain-id", 1337, "chain id")
	payers := fs.Int("payers", 8, "number of funded payer accounts")
	reorgEvery := fs.Duration("reorg-every", 0, "replace the last --reorg-depth blocks (never the finalized one) with a new branch this often; their transactions are sealed again at other positions (0: never)")
	reorgDepth := fs.Uint64("reorg-depth", 3, "blocks a reorganisation replaces")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var problems []string
	if *blockTime <= 0 {
		problems = append(problems, "--block-time must be positive")
	}
	if *burnRate < 0 || *burnRate > 10000 {
		problems = append(problems, "--burn-rate must be between 0 and 10000")
	}
	if *chainID == 0 {
		problems = append(problems, "--chain-id must be positive")
	}
	if *reorgEvery < 0 {
		problems = append(problems, "--reorg-every must not be negative")
	}
	if *reorgDepth < 1 || *reorgDepth > 31 {
		problems = append(problems, "--reorg-depth must be between 1 and 31 (blocks above the finalized one)")
	}
	if *payers < 1 || *payers > 1000 {
		problems = append(problems, "--payers must be between 1 and 1000")
	}
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments: %v", fs.Args()))
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, "devchain:", p)
	}
	if len(problems) > 0 {
		return 2
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The node's own logs: warnings and errors only.
	gethlog.SetDefault(gethlog.NewLogger(gethlog.NewTerminalHandlerWithLevel(stderr, gethlog.LevelWarn, false)))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	chain, err := devchain.Start(startCtx, devchain.Config{
		Addr: *addr, BlockTime: *blockTime, ChainID: *chainID, Payers: *payers, Log: log,
		ReorgEvery: *reorgEvery, ReorgDepth: *reorgDepth,
	})
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "devchain:", err)
		return 1
	}
	line, err := json.Marshal(chain.Info())
	if err != nil {
		fmt.Fprintln(stderr, "devchain:", err)
		return 1
	}
	fmt.Fprintln(stdout, string(line))
	chain.StartTraffic(*burnRate)
	log.Info("devchain ready", slog.String("rpc_url", chain.Info().RPCURL), slog.Float64("burn_rate", *burnRate))

	<-ctx.Done()
	log.Info("stopping devchain")
	if err := chain.Close(); err != nil {
		fmt.Fprintln(stderr, "devchain: closing:", err)
		return 1
	}
	return 0
}
