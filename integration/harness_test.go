// Package integration runs the real poller and devchain binaries against a
// real go-ethereum node and a real Postgres.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// binDir holds the binaries TestMain builds: poller and devchain.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		if pgtest.CI() {
			fmt.Fprintln(os.Stderr, "integration tests do not run in -short mode, and CI=true forbids skipping them")
			os.Exit(1)
		}
		fmt.Println("integration tests skipped in -short mode")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "burnpoller-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	for _, name := range []string{"poller", "devchain"} {
		// The poller is built with the race detector when the tests are; the
		// dev chain is test equipment, mostly go-ethereum, and under the race
		// detector its log index lags by seconds.
		if _, err := harness.Build(context.Background(), dir, name, raceEnabled && name == "poller"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	pgtest.Main(m, func() error { return os.RemoveAll(dir) })
}

// proc is a running binary whose output is kept for the test log.
type proc struct {
	name string
	p    *harness.Proc
	out  *syncBuffer
	// done is closed once the process has exited and err holds what
	// waiting for it returned.
	done chan struct{}
	err  error
}

// syncBuffer is the output of a process, written by it while a test reads.
type syncBuffer = harness.Buffer

func startProc(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	return launch(t, name, env, nil, bin, args...)
}

// launch starts bin; its stderr, and its stdout unless stdout is given, go
// to the output kept for the test log.
func launch(t *testing.T, name string, env []string, stdout io.Writer, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	if stdout == nil {
		stdout = p.out
	}
	// harness.Start sets GORACE=atexit_sleep_ms=0: exit timings are asserted.
	hp, err := harness.Start(harness.Spec{Name: name, Bin: filepath.Join(binDir, bin), Args: args, Env: env, Stdout: stdout, Stderr: p.out})
	if err != nil {
		t.Fatal(err)
	}
	p.p = hp
	go func() {
		<-hp.Done()
		p.err = hp.Err()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("---- output of %s ----\n%s", name, tail(p.out.String(), 60))
		}
	})
	return p
}

// signal sends s to the process unless it has exited.
func (p *proc) signal(s syscall.Signal) {
	_ = p.p.Signal(s)
}

// wait waits for the process to exit and returns its exit code (-1 if a
// signal ended it).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	code, err := p.p.Wait(timeout)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	return code
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// startDevchain runs the devchain binary and returns what it printed.
func startDevchain(t *testing.T, args ...string) (*proc, devchain.Info) {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	p := launch(t, "devchain", nil, pw, "devchain", append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	select {
	case line := <-lines:
		var info devchain.Info
		if err := json.Unmarshal([]byte(line), &info); err != nil {
			t.Fatalf("devchain printed %q: %v", line, err)
		}
		return p, info
	case <-p.done:
		t.Fatalf("devchain exited: %v\n%s", p.err, p.out.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("devchain did not become ready")
	}
	return nil, devchain.Info{}
}

// ledgerApp is the application_name of a replica's ledger sessions.
var ledgerApp = migrations.SessionName("burnpoller")

// pollerSessions counts the sessions of burnpoller processes (application
// name ledgerApp) in this test's own database that match cond, a condition
// on pg_stat_activity with $1… taken from args. Other tests' databases on
// the same server do not count.
func pollerSessions(t *testing.T, pool *pgxpool.Pool, cond string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = '`+ledgerApp+`' AND `+cond, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// freeAddr is a free 127.0.0.1 address for a replica's HTTP server.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

// rpcRecorder is a pass-through JSON-RPC proxy that records every
// eth_getLogs range it forwards.
type rpcRecorder struct {
	target string
	// delay holds every eth_getLogs request this long, so that replicas
	// spend time inside their transaction with the lock held.
	delay  time.Duration
	mu     sync.Mutex
	ranges []requestedRange
	srv    *http.Server
	URL    string
}

func startRecorder(t *testing.T, target string, delay time.Duration) *rpcRecorder {
	t.Helper()
	r := &rpcRecorder{target: target, delay: delay}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.URL = "http://" + l.Addr().String()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *rpcRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	type call struct {
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	var calls []call
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		_ = json.Unmarshal(body, &calls)
	} else {
		var c call
		_ = json.Unmarshal(body, &c)
		calls = []call{c}
	}
	// The time a request is made is when it arrives, before the delay.
	at := time.Now()
	for _, c := range calls {
		if c.Method != "eth_getLogs" || len(c.Params) == 0 {
			continue
		}
		time.Sleep(r.delay)
		var f struct {
			From hexutil.Uint64 `json:"fromBlock"`
			To   hexutil.Uint64 `json:"toBlock"`
		}
		if json.Unmarshal(c.Params[0], &f) == nil {
			r.mu.Lock()
			r.ranges = append(r.ranges, requestedRange{From: int64(f.From), To: int64(f.To), At: at})
			r.mu.Unlock()
		}
	}
	out, err := http.NewRequestWithContext(req.Context(), http.MethodPost, r.target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// requestedRange is one eth_getLogs request as the proxy forwarded it.
type requestedRange struct {
	From, To int64
	At       time.Time
}

func (r *rpcRecorder) getLogsRanges() []requestedRange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ranges)
}

// pollerEnv is the environment of a replica: the test settings
// (harness.TestSettings), then extra, where a later K=V wins.
func pollerEnv(dbURL, rpcURL string, info devchain.Info, httpAddr string, extra ...string) []string {
	return harness.PollerEnv(harness.Target{
		DatabaseURL: dbURL, RPCURL: rpcURL, ChainID: info.ChainID, Contract: info.BurnContract, HTTPAddr: httpAddr,
	}, append(harness.TestSettings(), extra...)...)
}

// scrape returns the value of one sample line of a replica's /metrics, or
// ok=false when the replica does not answer or lacks the sample.
func scrape(addr, sample string) (float64, bool) {
	v, err := harness.Scrape(context.Background(), addr, sample)
	return v, err == nil
}

func httpStatus(url string) int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor checks cond every 50 ms and fails the test if it does not hold
// within timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := harness.WaitFor(context.Background(), timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// ledgerRow is one payment as both the chain and the table describe it.
type ledgerRow struct {
	TxHash      string
	LogIndex    uint
	BlockNumber uint64
	BlockHash   string
	Payer       string
	Digest      string
	Amount      string
}

func (r ledgerRow) String() string {
	return fmt.Sprintf("%s/%d block %d (%s) payer %s digest %s amount %s", r.TxHash, r.LogIndex, r.BlockNumber, r.BlockHash, r.Payer, r.Digest, r.Amount)
}

// chainBurns reads, independently of the poller, every burn log of contract
// in [0, to] straight from the node.
func chainBurns(t *testing.T, rpcURL string, contract common.Address, to uint64) []ledgerRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := ethclient.DialContext(ctx, rpcURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	logs, err := client.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: big.NewInt(0), ToBlock: new(big.Int).SetUint64(to),
		Addresses: []common.Address{contract}, Topics: [][]common.Hash{{chain.BurnTopic}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []ledgerRow
	for _, l := range logs {
		b, err := chain.DecodeBurn(l)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ledgerRow{
			TxHash: b.TxHash.Hex(), LogIndex: b.LogIndex, BlockNumber: b.BlockNumber, BlockHash: b.BlockHash.Hex(),
			Payer: strings.ToLower(b.Payer.Hex()), Digest: b.Digest.Hex(), Amount: b.Amount.String(),
		})
	}
	sortRows(rows)
	return rows
}

func tableRows(t *testing.T, pool *pgxpool.Pool) []ledgerRow {
	t.Helper()
	return tableRowsWhere(t, pool, "true")
}

// tableRowsWhere are the payments that match cond, a condition with $1…
// taken from args.
func tableRowsWhere(t *testing.T, pool *pgxpool.Pool, cond string, args ...any) []ledgerRow {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT tx_hash, log_index, block_number, block_hash, payer, digest, amount::text FROM payments WHERE `+cond, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerRow
	for rows.Next() {
		var r ledgerRow
		var idx int32
		var block int64
		if err := rows.Scan(&r.TxHash, &idx, &block, &r.BlockHash, &r.Payer, &r.Digest, &r.Amount); err != nil {
			t.Fatal(err)
		}
		r.LogIndex, r.BlockNumber = uint(idx), uint64(block)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sortRows(out)
	return out
}

func sortRows(rows []ledgerRow) {
	slices.SortFunc(rows, func(a, b ledgerRow) int {
		if c := strings.Compare(a.TxHash, b.TxHash); c != 0 {
			return c
		}
		return int(a.LogIndex) - int(b.LogIndex)
	})
}

// assertLedgerEqualsChain compares the payments table with the chain's burns
// up to block to, row by row.
func assertLedgerEqualsChain(t *testing.T, pool *pgxpool.Pool, rpcURL string, contract common.Address, to uint64) []ledgerRow {
	t.Helper()
	want := chainBurns(t, rpcURL, contract, to)
	got := tableRows(t, pool)
	if slices.Equal(got, want) {
		return want
	}
	missing, extra := diffRows(want, got), diffRows(got, want)
	t.Fatalf("ledger differs from the chain up to block %d: %d rows, want %d\nmissing: %v\nextra: %v",
		to, len(got), len(want), firstN(missing, 10), firstN(extra, 10))
	return nil
}

func diffRows(a, b []ledgerRow) []ledgerRow {
	var out []ledgerRow
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

func firstN(rows []ledgerRow, n int) []ledgerRow {
	if len(rows) > n {
		return rows[:n]
	}
	return rows
}

// auditCursor records every committed cursor move into cursor_audit.
func auditCursor(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
		CREATE TABLE cursor_audit (
			seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			id text NOT NULL, old_block bigint NOT NULL, new_block bigint NOT NULL,
			at timestamptz NOT NULL DEFAULT clock_timestamp());
		CREATE FUNCTION audit_cursor() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO cursor_audit (id, old_block, new_block) VALUES (NEW.id, OLD.last_processed_block, NEW.last_processed_block);
			RETURN NEW;
		END $$;
		CREATE TRIGGER audit_cursor AFTER UPDATE ON block_cursors FOR EACH ROW
			WHEN (OLD.last_processed_block IS DISTINCT FROM NEW.last_processed_block)
			EXECUTE FUNCTION audit_cursor();`)
	if err != nil {
		t.Fatal(err)
	}
}

// cursorMove is one committed cursor update.
type cursorMove struct {
	Old, New int64
	At       time.Time // when the update ran, just before its commit
}

// committedRanges returns the audited cursor moves in commit order.
func committedRanges(t *testing.T, pool *pgxpool.Pool) []cursorMove {
	t.Helper()
	return committedRangesOf(t, pool, "")
}

// committedRangesOf returns the audited moves of cursor id ("": of every
// cursor) in commit order.
func committedRangesOf(t *testing.T, pool *pgxpool.Pool, id string) []cursorMove {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT old_block, new_block, at FROM cursor_audit WHERE $1 = '' OR id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []cursorMove
	for rows.Next() {
		var m cursorMove
		if err := rows.Scan(&m.Old, &m.New, &m.At); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// assertNoCommittedRangeRequested fails if eth_getLogs was ever asked for a
// block that a committed cursor move already covered when the request was
// made. Retrying a range whose transaction rolled back is fine.
func assertNoCommittedRangeRequested(t *testing.T, requested []requestedRange, committed []cursorMove) {
	t.Helper()
	for _, r := range requested {
		for _, m := range committed {
			if m.At.Before(r.At) && m.New >= r.From {
				t.Fatalf("eth_getLogs [%d, %d] at %s asked again for blocks committed up to %d at %s",
					r.From, r.To, r.At.Format(time.RFC3339Nano), m.New, m.At.Format(time.RFC3339Nano))
			}
		}
	}
}
