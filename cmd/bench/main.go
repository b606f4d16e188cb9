// Command bench measures burnpoller against the two physical ceilings of
// the machine it runs on, in one run: the node (eth_getLogs over the whole
// range, decoded) and Postgres (COPY into the payments table). It seeds a dev
// chain with many burns, times catch-up with one and three replicas (real
// poller processes), then a steady state at a fixed burn rate with
// head-to-row latency and failover after SIGKILL of the lock holder.
//
//	go run ./cmd/bench -burns 100000 -out bench.json
//
// Postgres comes from -database (an admin URL); each phase uses a fresh
// database on it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/devchain"
)

type options struct {
	database    string
	burns       int
	perTx       int
	txsPerBlock int
	steady      time.Duration
	steadyRate  float64
	blockTime   time.Duration
	out         string
	pollerEnv   string
}

func main() {
	var o options
	flag.StringVar(&o.database, "database", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin URL of the Postgres to use")
	flag.IntVar(&o.burns, "burns", 100_000, "burn logs to seed (1000000 for the memory goal)")
	flag.IntVar(&o.perTx, "per-tx", 250, "burns per seeding transaction (BatchBurner.burnMany)")
	flag.IntVar(&o.txsPerBlock, "txs-per-block", 2, "seeding transactions per block")
	flag.DurationVar(&o.steady, "steady", 60*time.Second, "length of the steady-state phase (0 skips it)")
	flag.Float64Var(&o.steadyRate, "steady-rate", 50, "burns per second in the steady state")
	flag.DurationVar(&o.blockTime, "block-time", 250*time.Millisecond, "block time in the steady state")
	flag.StringVar(&o.out, "out", "", "write the results as JSON to this file")
	flag.StringVar(&o.pollerEnv, "poller-env", "", "extra environment for the replicas, comma-separated K=V (e.g. GOMEMLIMIT=40MiB)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.pollerEnv != "" {
		extraEnv = strings.Split(o.pollerEnv, ",")
	}
	res, err := run(context.Background(), o, log)
	if err != nil {
		log.Error("bench failed", slog.Any("err", err))
		os.Exit(1)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	if o.out != "" {
		if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
			log.Error("writing results", slog.Any("err", err))
			os.Exit(1)
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Results is everything the bench measured.
type Results struct {
	Machine     string  `json:"machine"`
	Burns       int     `json:"burns"`
	Blocks      uint64  `json:"blocks"`
	SeedSeconds float64 `json:"seed_seconds"`
	NodeCeiling Rate    `json:"node_ceiling"`
	PGCeiling   Rate    `json:"postgres_ceiling"`
	// SharedCeiling is node and Postgres together on this machine: fetch
	// and COPY pipelined, no burnpoller (they share the same cores).
	SharedCeiling  Rate     `json:"node_and_postgres_together"`
	CatchUp1       CatchUp  `json:"catch_up_1_replica"`
	CatchUp3       CatchUp  `json:"catch_up_3_replicas"`
	Steady         *Steady  `json:"steady_state,omitempty"`
	SteadyWS       *Steady  `json:"steady_state_with_newheads,omitempty"`
	Settings       []string `json:"poller_settings"`
	GetLogsRatio31 float64  `json:"getlogs_calls_3_vs_1"`
	// Backfill is `poller backfill --from 0 --to finalized`, one process.
	Backfill Backfill `json:"backfill_command"`
	// FailoverBusyMs: three replicas catching up; the busy lock holder is
	// SIGKILLed; the time until a standby, waiting on the lock, holds it.
	FailoverBusyMs float64 `json:"failover_under_load_ms"`
}

// Rate is a count over a time.
type Rate struct {
	Items   int     `json:"items"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_second"`
	Calls   int     `json:"calls,omitempty"`
}

// CatchUp is one catch-up run.
type CatchUp struct {
	Replicas        int     `json:"replicas"`
	Seconds         float64 `json:"seconds"`
	BurnsPerSec     float64 `json:"burns_per_second"`
	RatioToCeiling  float64 `json:"ratio_to_min_ceiling"`
	RatioToShared   float64 `json:"ratio_to_node_and_postgres_together"`
	FirstCommitSecs float64 `json:"first_commit_seconds"`
	// FailoverMs: with three replicas, the busy lock holder is SIGKILLed
	// mid catch-up; the time until another replica commits a range.
	FailoverMs       float64          `json:"failover_after_sigkill_ms,omitempty"`
	GetLogsCalls     float64          `json:"eth_getLogs_calls"`
	RPCCalls         float64          `json:"rpc_calls"`
	DuplicateInserts float64          `json:"duplicate_insert_attempts"`
	PeakRSSMiB       map[string]int64 `json:"peak_rss_mib"`
	Rows             int              `json:"rows"`
}

// Backfill is the one-shot backfill command over the whole range.
type Backfill struct {
	Seconds     float64 `json:"seconds"`
	BurnsPerSec float64 `json:"burns_per_second"`
	PeakRSSMiB  int64   `json:"peak_rss_mib"`
	Rows        int     `json:"rows"`
	ExitCode    int     `json:"exit_code"`
}

// Steady is the steady-state phase.
type Steady struct {
	Seconds          float64 `json:"seconds"`
	Rate             float64 `json:"burns_per_second_sent"`
	Payments         int     `json:"payments"`
	PollInterval     string  `json:"poll_interval"`
	LatencyP50Ms     float64 `json:"head_to_row_p50_ms"`
	LatencyP99Ms     float64 `json:"head_to_row_p99_ms"`
	LatencyMaxMs     float64 `json:"head_to_row_max_ms"`
	DuplicateInserts float64 `json:"duplicate_insert_attempts"`
	GetLogsCalls     float64 `json:"eth_getLogs_calls"`
	FailoverMs       float64 `json:"failover_after_sigkill_ms"`
	NewHeads         bool    `json:"newheads_subscription"`
}

func run(ctx context.Context, o options, log *slog.Logger) (*Results, error) {
	res := &Results{Burns: o.burns, Machine: machine()}
	bin, err := buildPoller()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(bin))

	// The chain: seeded in-process, sealed by this program.
	c, err := devchain.Start(ctx, devchain.Config{Addr: "127.0.0.1:0", Payers: max(o.txsPerBlock, 2)})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	info := c.Info()
	log.Info("seeding", slog.Int("burns", o.burns))
	seedStart := time.Now()
	head, err := seed(ctx, c, o)
	if err != nil {
		return nil, fmt.Errorf("seeding: %w", err)
	}
	res.SeedSeconds = time.Since(seedStart).Seconds()
	res.Blocks = head
	target, err := finalized(ctx, info.RPCURL)
	if err != nil {
		return nil, err
	}
	log.Info("seeded", slog.Uint64("head", head), slog.Uint64("finalized", target), slog.Float64("seconds", res.SeedSeconds))

	// Ceiling (a): the node, with the poller's own chunking.
	rows, nodeRate, err := nodeCeiling(ctx, info, target)
	if err != nil {
		return nil, fmt.Errorf("node ceiling: %w", err)
	}
	if len(rows) != o.burns {
		return nil, fmt.Errorf("the node returned %d burns, %d were sent", len(rows), o.burns)
	}
	res.NodeCeiling = nodeRate
	log.Info("node ceiling", slog.Float64("burns_per_second", nodeRate.PerSec), slog.Int("calls", nodeRate.Calls))

	// Ceiling (b): Postgres, COPY into the real payments table.
	pgRate, err := pgCeiling(ctx, o.database, rows)
	if err != nil {
		return nil, fmt.Errorf("postgres ceiling: %w", err)
	}
	res.PGCeiling = pgRate
	rows = nil
	runtime.GC()
	log.Info("postgres ceiling", slog.Float64("rows_per_second", pgRate.PerSec))
	ceiling := min(nodeRate.PerSec, pgRate.PerSec)
	shared, err := sharedCeiling(ctx, o.database, info, target)
	if err != nil {
		return nil, fmt.Errorf("shared ceiling: %w", err)
	}
	res.SharedCeiling = shared
	log.Info("node and postgres together", slog.Float64("per_second", shared.PerSec))

	res.Settings = []string{"all defaults (MAX_BLOCK_RANGE=2000, FINALITY=finalized)", "POLL_INTERVAL=200ms for catch-up"}
	for _, n := range []int{1, 3} {
		cu, err := catchUp(ctx, bin, o.database, info, target, n, false, log)
		if err != nil {
			return nil, fmt.Errorf("catch-up with %d: %w", n, err)
		}
		if cu.Rows != o.burns {
			return nil, fmt.Errorf("catch-up with %d replicas recorded %d rows, want %d", n, cu.Rows, o.burns)
		}
		cu.BurnsPerSec = float64(o.burns) / cu.Seconds
		cu.RatioToCeiling = cu.BurnsPerSec / ceiling
		cu.RatioToShared = cu.BurnsPerSec / shared.PerSec
		if n == 1 {
			res.CatchUp1 = cu
		} else {
			res.CatchUp3 = cu
		}
		log.Info("catch-up", slog.Int("replicas", n), slog.Float64("burns_per_second", cu.BurnsPerSec),
			slog.Float64("ratio", cu.RatioToCeiling), slog.Any("rss_mib", cu.PeakRSSMiB))
	}
	bf, err := backfill(ctx, bin, o.database, info)
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	res.Backfill = bf
	log.Info("backfill command", slog.Float64("burns_per_second", bf.BurnsPerSec), slog.Int64("rss_mib", bf.PeakRSSMiB))
	fo, err := catchUp(ctx, bin, o.database, info, target, 3, true, log)
	if err != nil {
		return nil, fmt.Errorf("failover under load: %w", err)
	}
	res.FailoverBusyMs = fo.FailoverMs
	log.Info("failover under load", slog.Float64("ms", fo.FailoverMs))
	if res.CatchUp1.GetLogsCalls > 0 {
		res.GetLogsRatio31 = res.CatchUp3.GetLogsCalls / res.CatchUp1.GetLogsCalls
	}

	if o.steady > 0 {
		st, err := steady(ctx, c, bin, o, false, log)
		if err != nil {
			return nil, fmt.Errorf("steady state: %w", err)
		}
		res.Steady = st
		if st, err = steady(ctx, c, bin, o, true, log); err != nil {
			return nil, fmt.Errorf("steady state with newHeads: %w", err)
		}
		res.SteadyWS = st
	}
	return res, nil
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.+)`).FindSubmatch(b); m != nil {
			cpu = string(m[1])
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if m := regexp.MustCompile(`MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
			mem = fmt.Sprintf(", %d GiB", kb>>20)
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// buildPoller builds the poller binary as users run it (no race detector).
func buildPoller() (string, error) {
	dir, err := os.MkdirTemp("", "bench-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "poller")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/poller")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the poller: %v\n%s", err, out)
	}
	return bin, nil
}

// seed mines o.burns burns, o.perTx per transaction and o.txsPerBlock
// transactions per block, then enough empty blocks for them to finalize.
func seed(ctx context.Context, c *devchain.Chain, o options) (uint64, error) {
	left := o.burns
	for left > 0 {
		for p := 0; p < o.txsPerBlock && left > 0; p++ {
			n := min(o.perTx, left)
			amounts := make([]*big.Int, n)
			digests := make([][32]byte, n)
			for i := range n {
				amounts[i] = devchain.RandomAmount()
				digests[i] = devchain.RandomDigest()
			}
			if _, err := c.BurnMany(ctx, p, amounts, digests); err != nil {
				return 0, err
			}
			left -= n
		}
		c.Seal()
	}
	for range 64 {
		c.Seal()
	}
	return c.Client().BlockNumber(ctx)
}

func finalized(ctx context.Context, rpcURL string) (uint64, error) {
	cl, err := chain.Dial(ctx, rpcURL, chain.Options{})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	h, err := cl.HeaderByTag(ctx, "finalized")
	return h.Number, err
}

type endpointsCounter struct{ calls int }

func (c *endpointsCounter) RPC(_, method, _ string, _ time.Duration) {
	if method == "eth_getLogs" {
		c.calls++
	}
}
func (*endpointsCounter) BadReply(string, string)   {}
func (*endpointsCounter) Lagging(string, int64)     {}
func (*endpointsCounter) RangeLimit(string, uint64) {}
func (*endpointsCounter) Active(string)             {}

// nodeCeiling reads every burn up to target as the poller does (same
// endpoint logic, default MAX_BLOCK_RANGE), decodes it and stores nothing
// but the rows for the Postgres ceiling, which are not timed.
func nodeCeiling(ctx context.Context, info devchain.Info, target uint64) ([][]any, Rate, error) {
	counter := &endpointsCounter{}
	cl, err := chain.Dial(ctx, info.RPCURL, chain.Options{Timeout: time.Minute, Observer: counter})
	if err != nil {
		return nil, Rate{}, err
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{
		ChainID: info.ChainID, Finality: chain.FinalityFinalized, MaxRange: 2000,
	}, counter, slog.New(slog.DiscardHandler))
	defer eps.Close()
	if _, err := eps.Target(ctx); err != nil {
		return nil, Rate{}, err
	}
	var (
		rows    [][]any
		elapsed time.Duration
	)
	for from := uint64(0); from <= target; {
		start := time.Now()
		r, err := eps.BurnRange(ctx, info.BurnContract, from, target)
		elapsed += time.Since(start)
		if err != nil {
			return nil, Rate{}, err
		}
		rows = appendRows(rows, info.ChainID, r.Burns)
		from = r.To.Number + 1
	}
	return rows, Rate{Items: len(rows), Seconds: elapsed.Seconds(), PerSec: float64(len(rows)) / elapsed.Seconds(), Calls: counter.calls}, nil
}

// sharedCeiling fetches every burn as nodeCeiling does and COPYs each range
// into a fresh payments table while the next is fetched: the most node and
// Postgres can do together on this machine, with no burnpoller in between.
func sharedCeiling(ctx context.Context, admin string, info devchain.Info, target uint64) (Rate, error) {
	dbURL, err := freshDB(ctx, admin, "bench_shared")
	if err != nil {
		return Rate{}, err
	}
	defer dropDB(ctx, admin, "bench_shared")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return Rate{}, err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		return Rate{}, err
	}
	cl, err := chain.Dial(ctx, info.RPCURL, chain.Options{Timeout: time.Minute})
	if err != nil {
		return Rate{}, err
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{
		ChainID: info.ChainID, Finality: chain.FinalityFinalized, MaxRange: 2000,
	}, nil, slog.New(slog.DiscardHandler))
	defer eps.Close()
	if _, err := eps.Target(ctx); err != nil {
		return Rate{}, err
	}
	type chunk struct {
		rows [][]any
		err  error
	}
	chunks := make(chan chunk, 1)
	start := time.Now()
	go func() {
		defer close(chunks)
		for from := uint64(0); from <= target; {
			r, err := eps.BurnRange(ctx, info.BurnContract, from, target)
			if err != nil {
				chunks <- chunk{err: err}
				return
			}
			chunks <- chunk{rows: appendRows(nil, info.ChainID, r.Burns)}
			from = r.To.Number + 1
		}
	}()
	total := 0
	for c := range chunks {
		if c.err != nil {
			return Rate{}, c.err
		}
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"payments"}, payCols, pgx.CopyFromRows(c.rows))
		if err != nil {
			return Rate{}, err
		}
		total += int(n)
	}
	took := time.Since(start)
	return Rate{Items: total, Seconds: took.Seconds(), PerSec: float64(total) / took.Seconds()}, nil
}

// appendRows appends burns as payments rows, in the order of payCols.
func appendRows(rows [][]any, chainID uint64, burns []chain.Burn) [][]any {
	for _, b := range burns {
		rows = append(rows, []any{int64(chainID), strings.ToLower(b.Contract.Hex()), b.TxHash.Hex(), int32(b.LogIndex),
			int64(b.BlockNumber), b.BlockHash.Hex(), strings.ToLower(b.Payer.Hex()), b.Digest.Hex(), b.Amount.String(),
			time.Unix(b.Timestamp, 0).UTC()})
	}
	return rows
}

// payCols are the payments columns COPY fills.
var payCols = []string{"chain_id", "contract", "tx_hash", "log_index", "block_number", "block_hash", "payer", "digest", "amount", "burned_at"}

// freshDB creates a migrated database and returns its URL.
func freshDB(ctx context.Context, admin, name string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDB(ctx context.Context, admin, name string) {
	if conn, err := pgx.Connect(ctx, admin); err == nil {
		_, _ = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
		conn.Close(ctx)
	}
}

// pgCeiling COPYs the rows into a fresh payments table with its indexes
// and constraints.
func pgCeiling(ctx context.Context, admin string, rows [][]any) (Rate, error) {
	dbURL, err := freshDB(ctx, admin, "bench_copy")
	if err != nil {
		return Rate{}, err
	}
	defer dropDB(ctx, admin, "bench_copy")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return Rate{}, err
	}
	defer conn.Close(ctx)
	if _, err := migrations.Migrate(ctx, conn); err != nil {
		return Rate{}, err
	}
	start := time.Now()
	// COPY wants numeric amounts as values pgx can encode; decimal text casts.
	n, err := conn.CopyFrom(ctx, pgx.Identifier{"payments"}, payCols, pgx.CopyFromRows(rows))
	if err != nil {
		return Rate{}, err
	}
	took := time.Since(start)
	return Rate{Items: int(n), Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds()}, nil
}

// proc is a running poller.
type proc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	logs *os.File
}

func startPoller(bin string, env []string, logDir, name string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run")
	cmd.Env = append(append(os.Environ(), env...), "HTTP_ADDR="+addr)
	cmd.Stderr = f
	cmd.Stdout = f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, addr: addr, done: make(chan struct{}), logs: f}
	go func() { _ = cmd.Wait(); close(p.done); f.Close() }()
	return p, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// peakRSS reads the process's high-water mark of resident memory, in MiB.
func (p *proc) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	m := regexp.MustCompile(`VmHWM:\s*(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb >> 10
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// metric sums the samples of a metric whose line starts with prefix.
func metric(addr, prefix string) float64 {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// extraEnv is -poller-env.
var extraEnv []string

func pollerEnv(dbURL string, info devchain.Info, extra ...string) []string {
	extra = append(extra, extraEnv...)
	return append([]string{
		"DATABASE_URL=" + dbURL,
		"RPC_URL=" + info.RPCURL,
		"CHAIN_ID=" + strconv.FormatUint(info.ChainID, 10),
		"BURN_CONTRACT=" + info.BurnContract.Hex(),
		"LOG_FORMAT=json",
	}, extra...)
}

func cursorOf(ctx context.Context, conn *pgx.Conn) int64 {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(last_processed_block), -2) FROM block_cursors`).Scan(&n); err != nil {
		return -2
	}
	return n
}

// catchUp times n replicas from an empty ledger to target.
//
// With kill, the busy lock holder is SIGKILLed once a quarter of the range is
// done; catchUp returns as soon as another replica holds the lock, with the
// time that took in FailoverMs and nothing else measured.
func catchUp(ctx context.Context, bin, admin string, info devchain.Info, target uint64, n int, kill bool, log *slog.Logger) (CatchUp, error) {
	name := fmt.Sprintf("bench_catchup_%d_%v", n, kill)
	dbURL, err := freshDB(ctx, admin, name)
	if err != nil {
		return CatchUp{}, err
	}
	defer dropDB(ctx, admin, name)
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return CatchUp{}, err
	}
	defer conn.Close(ctx)
	logDir, _ := os.MkdirTemp("", "bench-logs-")
	start := time.Now()
	var procs []*proc
	for i := range n {
		p, err := startPoller(bin, pollerEnv(dbURL, info, "POLL_INTERVAL=200ms"), logDir, fmt.Sprintf("catchup-%d-%d", n, i))
		if err != nil {
			return CatchUp{}, err
		}
		procs = append(procs, p)
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	deadline := time.Now().Add(30 * time.Minute)
	var (
		firstCommit time.Duration
		killed      *proc
	)
	for c := cursorOf(ctx, conn); c < int64(target); c = cursorOf(ctx, conn) {
		if c >= 0 && firstCommit == 0 {
			firstCommit = time.Since(start)
		}
		// Halfway, with three replicas: SIGKILL the busy holder and time the
		// hand-over to a standby waiting on the lock.
		if kill && killed == nil && c >= int64(target)/4 {
			for _, p := range procs {
				if metric(p.addr, "burnpoller_lock_held") == 1 {
					killed = p
					break
				}
			}
			if killed != nil {
				_ = killed.cmd.Process.Kill()
				at := time.Now()
				for time.Since(at) < time.Minute {
					for _, q := range procs {
						if q != killed && metric(q.addr, "burnpoller_lock_held") == 1 {
							return CatchUp{Replicas: n, FailoverMs: float64(time.Since(at).Microseconds()) / 1000}, nil
						}
					}
				}
				return CatchUp{}, errors.New("no standby took the lock within a minute")
			}
		}
		if time.Now().After(deadline) {
			return CatchUp{}, fmt.Errorf("no catch-up within 30 minutes (logs in %s)", logDir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cu := CatchUp{Replicas: n, Seconds: time.Since(start).Seconds(), FirstCommitSecs: firstCommit.Seconds(), PeakRSSMiB: map[string]int64{}}
	for i, p := range procs {
		cu.GetLogsCalls += metric(p.addr, `burnpoller_rpc_requests_total{method="eth_getLogs"`)
		cu.RPCCalls += metric(p.addr, `burnpoller_rpc_requests_total{`)
		cu.DuplicateInserts += metric(p.addr, "burnpoller_payments_duplicate_total")
		cu.PeakRSSMiB[fmt.Sprintf("replica-%d", i)] = p.peakRSS()
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&cu.Rows); err != nil {
		return CatchUp{}, err
	}
	_ = os.RemoveAll(logDir)
	return cu, nil
}

// backfill runs `poller backfill --from 0 --to finalized` on an empty
// ledger, sampling its peak resident memory until it exits.
func backfill(ctx context.Context, bin, admin string, info devchain.Info) (Backfill, error) {
	dbURL, err := freshDB(ctx, admin, "bench_backfill")
	if err != nil {
		return Backfill{}, err
	}
	defer dropDB(ctx, admin, "bench_backfill")
	cmd := exec.Command(bin, "backfill", "--from", "0", "--to", "finalized")
	cmd.Env = append(os.Environ(), pollerEnv(dbURL, info)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Backfill{}, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	var peak int64
	for running := true; running; {
		select {
		case <-p.done:
			running = false
		case <-time.After(50 * time.Millisecond):
			peak = max(peak, p.peakRSS())
		}
	}
	b := Backfill{Seconds: time.Since(start).Seconds(), PeakRSSMiB: peak, ExitCode: cmd.ProcessState.ExitCode()}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return b, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&b.Rows); err != nil {
		return b, err
	}
	b.BurnsPerSec = float64(b.Rows) / b.Seconds
	return b, nil
}

// steady runs three replicas at the default POLL_INTERVAL while burns
// arrive at a fixed rate, measures head-to-row latency (from the moment a
// block is within the finality target to the moment its payment's
// transaction commits, seen by LISTEN), and then the failover after SIGKILL
// of the lock holder.
func steady(ctx context.Context, c *devchain.Chain, bin string, o options, ws bool, log *slog.Logger) (*Steady, error) {
	info := c.Info()
	dbName := "bench_steady"
	env := []string{}
	if ws {
		dbName += "_ws"
		env = append(env, "RPC_WS_URL="+info.WSURL)
	}
	dbURL, err := freshDB(ctx, o.database, dbName)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, o.database, dbName)
	// Start at the current head: the steady state, not a catch-up.
	head, err := c.Client().BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	logDir, _ := os.MkdirTemp("", "bench-steady-")
	const pollInterval = "2s"
	var procs []*proc
	for i := range 3 {
		p, err := startPoller(bin, pollerEnv(dbURL, info, append(env, "START_BLOCK="+strconv.FormatUint(head+1, 10))...), logDir, fmt.Sprintf("steady-%d", i))
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	listen, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer listen.Close(ctx)
	for {
		if _, err := listen.Exec(ctx, "LISTEN burnpoller_payments"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	reader, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer reader.Close(ctx)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	// Seal blocks; note when each block comes within the finality target.
	var (
		mu        sync.Mutex
		finalAt   = map[uint64]time.Time{}
		lastFinal uint64
	)
	cl, err := chain.Dial(ctx, info.RPCURL, chain.Options{})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	wg.Go(func() {
		t := time.NewTicker(o.blockTime)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				c.Seal()
			}
		}
	})
	wg.Go(func() {
		for runCtx.Err() == nil {
			h, err := cl.HeaderByTag(runCtx, "finalized")
			if err == nil {
				now := time.Now()
				mu.Lock()
				for b := lastFinal + 1; b <= h.Number; b++ {
					finalAt[b] = now
				}
				lastFinal = max(lastFinal, h.Number)
				mu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Go(func() { c.Traffic(runCtx, o.steadyRate, nil) })

	// Payments as they commit.
	type seen struct {
		block int64
		at    time.Time
	}
	var arrivals []seen
	var amu sync.Mutex
	wg.Go(func() {
		for {
			n, err := listen.WaitForNotification(runCtx)
			if err != nil {
				return
			}
			at := time.Now()
			var note struct {
				Payments []struct {
					Block int64 `json:"block_number"`
				} `json:"payments"`
				FirstID int64 `json:"first_id"`
				LastID  int64 `json:"last_id"`
			}
			if json.Unmarshal([]byte(n.Payload), &note) != nil {
				continue
			}
			blocks := make([]int64, 0, len(note.Payments))
			for _, p := range note.Payments {
				blocks = append(blocks, p.Block)
			}
			if len(blocks) == 0 {
				// A large transaction names its id range only.
				rows, err := reader.Query(runCtx, `SELECT block_number FROM payments WHERE id BETWEEN $1 AND $2`, note.FirstID, note.LastID)
				if err != nil {
					continue
				}
				for rows.Next() {
					var b int64
					if rows.Scan(&b) == nil {
						blocks = append(blocks, b)
					}
				}
				rows.Close()
			}
			amu.Lock()
			for _, b := range blocks {
				arrivals = append(arrivals, seen{b, at})
			}
			amu.Unlock()
		}
	})

	log.Info("steady state", slog.Duration("for", o.steady), slog.Float64("rate", o.steadyRate), slog.Bool("newheads", ws))
	time.Sleep(o.steady)

	// Failover: SIGKILL the lock holder, time until another holds the lock
	// or completes a poll. The holder is caught by scraping lock_held.
	failover := -1.0
	caught := time.Now().Add(2 * time.Minute)
	for failover < 0 && time.Now().Before(caught) {
		for i, p := range procs {
			if metric(p.addr, "burnpoller_lock_held") != 1 {
				continue
			}
			_ = p.cmd.Process.Kill()
			killed := time.Now()
			others := slices.Delete(slices.Clone(procs), i, i+1)
			base := map[*proc]float64{}
			for _, q := range others {
				base[q] = metric(q.addr, `burnpoller_polls_total{result="committed"}`) + metric(q.addr, `burnpoller_polls_total{result="idle"}`)
			}
			for time.Since(killed) < 30*time.Second && failover < 0 {
				for _, q := range others {
					held := metric(q.addr, "burnpoller_lock_held") == 1
					done := metric(q.addr, `burnpoller_polls_total{result="committed"}`)+metric(q.addr, `burnpoller_polls_total{result="idle"}`) > base[q]
					if held || done {
						failover = float64(time.Since(killed).Microseconds()) / 1000
						break
					}
				}
			}
			break
		}
	}
	stop()
	wg.Wait()

	st := &Steady{Seconds: o.steady.Seconds(), Rate: o.steadyRate, PollInterval: pollInterval, FailoverMs: failover, NewHeads: ws}
	var lat []float64
	mu.Lock()
	amu.Lock()
	for _, a := range arrivals {
		if f, ok := finalAt[uint64(a.block)]; ok {
			lat = append(lat, float64(a.at.Sub(f).Microseconds())/1000)
		}
	}
	st.Payments = len(arrivals)
	amu.Unlock()
	mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		st.LatencyP50Ms = lat[len(lat)/2]
		st.LatencyP99Ms = lat[len(lat)*99/100]
		st.LatencyMaxMs = lat[len(lat)-1]
	}
	for _, p := range procs {
		st.DuplicateInserts += metric(p.addr, "burnpoller_payments_duplicate_total")
		st.GetLogsCalls += metric(p.addr, `burnpoller_rpc_requests_total{method="eth_getLogs"`)
	}
	_ = os.RemoveAll(logDir)
	return st, nil
}
