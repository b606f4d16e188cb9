package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// ponderVersion is the Ponder the peer figures are measured with.
const ponderVersion = "1.0.0"

// Ponder is Ponder indexing the same chain's burns into Postgres: a
// minimal project with one table written per LogBurnWithDigest.
type Ponder struct {
	Version string `json:"version"`
	Rows    int    `json:"rows"`
	// Seconds is from the process's start to the last row.
	Seconds float64 `json:"seconds"`
	// FirstRowSeconds is from the start to the first row seen.
	FirstRowSeconds float64 `json:"first_row_seconds"`
	// SteadyPerSec is the rows after the first sample that held any, over
	// the time from that sample to the last row: Ponder's rate once it
	// indexes, its start-up left out.
	SteadyPerSec float64 `json:"steady_rows_per_second"`
	PeakRSSMiB   int64   `json:"peak_rss_mib"`
	Settings     string  `json:"settings"`
}

// ponderFiles are the project's files; the chain, contract and database
// come from the environment.
var ponderFiles = map[string]string{
	"package.json": `{
  "name": "burnpoller-bench-ponder",
  "private": true,
  "type": "module",
  "dependencies": { "ponder": "` + ponderVersion + `", "viem": "2.21.57", "hono": "4.6.14", "typescript": "5.7.2" }
}
`,
	"ponder.config.ts": `import { createConfig } from "ponder";
import { http } from "viem";
import { BurnAbi } from "./abis/BurnAbi";

export default createConfig({
  database: { kind: "postgres", connectionString: process.env.DATABASE_URL },
  networks: {
    dev: {
      chainId: Number(process.env.PONDER_CHAIN_ID),
      transport: http(process.env.PONDER_RPC_URL),
      // No client-side rate limit: the node is local and the figure is
      // Ponder's own speed.
      maxRequestsPerSecond: 100000,
    },
  },
  contracts: {
    Burn: {
      network: "dev",
      abi: BurnAbi,
      address: process.env.PONDER_CONTRACT as ` + "`0x${string}`" + `,
      startBlock: 0,
      // Unset: Ponder goes on following the chain (realtime).
      endBlock: process.env.PONDER_END_BLOCK ? Number(process.env.PONDER_END_BLOCK) : undefined,
    },
  },
});
`,
	"ponder.schema.ts": `import { onchainTable } from "ponder";

export const burn = onchainTable("burn", (t) => ({
  id: t.text().primaryKey(),
  payer: t.hex().notNull(),
  amount: t.bigint().notNull(),
  digest: t.hex().notNull(),
  burnedAt: t.bigint().notNull(),
  blockNumber: t.bigint().notNull(),
  blockHash: t.hex().notNull(),
  txHash: t.hex().notNull(),
  logIndex: t.integer().notNull(),
}));
`,
	"src/index.ts": `import { ponder } from "ponder:registry";
import { burn } from "ponder:schema";

ponder.on("Burn:LogBurnWithDigest", async ({ event, context }) => {
  await context.db.insert(burn).values({
    id: event.id,
    payer: event.args.payer,
    amount: event.args.amount,
    digest: event.args.digest,
    burnedAt: event.args.timestamp,
    blockNumber: event.block.number,
    blockHash: event.block.hash,
    txHash: event.transaction.hash,
    logIndex: event.log.logIndex,
  });
});
`,
	// Ponder 1.0 wants an API; none is used.
	"src/api/index.ts": `import { Hono } from "hono";

const app = new Hono();

export default app;
`,
	"abis/BurnAbi.ts": `export const BurnAbi = [
  {
    type: "event",
    name: "LogBurnWithDigest",
    inputs: [
      { name: "payer", type: "address", indexed: true },
      { name: "amount", type: "uint256", indexed: false },
      { name: "digest", type: "bytes32", indexed: true },
      { name: "timestamp", type: "uint256", indexed: false },
    ],
    anonymous: false,
  },
] as const;
`,
	"tsconfig.json": `{
  "compilerOptions": {
    "strict": true, "moduleResolution": "bundler", "module": "ESNext", "target": "ES2022",
    "noEmit": true, "skipLibCheck": true, "lib": ["ES2022"]
  },
  "include": ["./**/*.ts"],
  "exclude": ["node_modules"]
}
`,
}

// ponderProject writes the project into dir and installs it with npm
// unless ponder is installed there already.
func ponderProject(ctx context.Context, dir string) error {
	for name, text := range ponderFiles {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ponder", "package.json")); err == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm install in %s: %w\n%s", dir, err, lastLines(string(out)))
	}
	return nil
}

// ponderProc is a running Ponder and where it logs and serves.
type ponderProc struct {
	proc *harness.Proc
	log  *os.File
	// addr serves Ponder's /ready (200 once its historical sync is done).
	addr string
}

// startPonder starts Ponder's project in dir on the database dbURL,
// reading contract's burns from the node at rpcURL, with extra environment
// (PONDER_END_BLOCK=N stops at block N; without it Ponder follows the
// chain). Its log is dir/ponder.log.
func startPonder(dir, dbURL, rpcURL string, chainID uint64, contract common.Address, extra ...string) (*ponderProc, error) {
	port, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "ponder.log"))
	if err != nil {
		return nil, err
	}
	// Ponder's own cache of the chain lives in the database too: a fresh
	// one per run, so it reads the node every time.
	_ = os.RemoveAll(filepath.Join(dir, ".ponder"))
	p, err := harness.Start(harness.Spec{
		Name: "ponder", Bin: "node",
		Args: []string{filepath.Join(dir, "node_modules/ponder/dist/esm/bin/ponder.js"), "--root", dir, "--log-format", "json",
			"start", "--schema", "bench", "--port", strconv.Itoa(port.Port)},
		Env: append([]string{"DATABASE_URL=" + dbURL, "PONDER_RPC_URL=" + rpcURL, "PONDER_CHAIN_ID=" + strconv.FormatUint(chainID, 10),
			"PONDER_CONTRACT=" + contract.Hex(), "PONDER_TELEMETRY_DISABLED=true"}, extra...),
		Stdout: logFile, Stderr: logFile,
	})
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	return &ponderProc{proc: p, log: logFile, addr: port.String()}, nil
}

// stop stops Ponder and closes its log.
func (p *ponderProc) stop() {
	_, _ = p.proc.Stop(10 * time.Second)
	_ = p.log.Close()
}

// ponderRun times Ponder from an empty database to all burns burns of
// contract up to block last, on the node the bench reads.
func (b *bench) ponderRun(ctx context.Context, o options, last uint64, contract common.Address, burns int) (*Ponder, error) {
	dir, err := filepath.Abs(o.ponder)
	if err != nil {
		return nil, err
	}
	if err := ponderProject(ctx, dir); err != nil {
		return nil, err
	}
	const name = "bench_ponder"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, b.admin, name)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	start := time.Now()
	pp, err := startPonder(dir, dbURL, b.info.RPCURL, b.info.ChainID, contract, "PONDER_END_BLOCK="+strconv.FormatUint(last, 10))
	if err != nil {
		return nil, err
	}
	defer pp.stop()
	p, logFile := pp.proc, pp.log
	res := &Ponder{Version: ponderVersion, Settings: "startBlock 0, endBlock the finalized block, maxRequestsPerSecond 100000, Postgres"}
	var (
		firstAt   time.Duration
		firstRows int
		peak      int64
	)
	deadline := time.Now().Add(15 * time.Minute)
	for {
		peak = max(peak, peakRSSMiB(p))
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM bench.burn`).Scan(&n)
		if err == nil && n > 0 && firstAt == 0 {
			firstAt, firstRows = time.Since(start), n
		}
		if err == nil && n >= burns {
			res.Rows, res.Seconds = n, time.Since(start).Seconds()
			break
		}
		if p.Exited() {
			out, _ := os.ReadFile(logFile.Name())
			return nil, fmt.Errorf("ponder exited (%d rows): %s", n, lastLines(string(out)))
		}
		if time.Now().After(deadline) {
			return nil, errors.New("ponder did not index every burn within 15 minutes (see " + logFile.Name() + ")")
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.FirstRowSeconds = firstAt.Seconds()
	if steady := res.Seconds - firstAt.Seconds(); steady > 0 && res.Rows > firstRows {
		res.SteadyPerSec = float64(res.Rows-firstRows) / steady
	}
	res.PeakRSSMiB = peak
	b.log.Info("ponder", slog.Float64("seconds", res.Seconds), slog.Float64("first_row_seconds", res.FirstRowSeconds),
		slog.Float64("steady_rows_per_second", res.SteadyPerSec))
	return res, nil
}
