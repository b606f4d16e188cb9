package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/goleak"
)

// child is testdata/child, built once by TestMain with BuildPackage.
var child string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "harness-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	child = filepath.Join(dir, "child")
	if err := BuildPackage(context.Background(), "./testdata/child", child, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "after the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// start starts the child with args, its stdout and stderr in separate
// buffers, and kills it when the test ends.
func start(t *testing.T, env []string, args ...string) (*Proc, *Buffer, *Buffer) {
	t.Helper()
	var stdout, stderr Buffer
	p, err := Start(Spec{Bin: child, Args: args, Env: env, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
	})
	return p, &stdout, &stderr
}

// waitOutput waits until the child has printed line on stdout.
func waitOutput(t *testing.T, out *Buffer, line string) {
	t.Helper()
	if err := WaitFor(context.Background(), 30*time.Second, "output "+line, func() bool {
		return strings.Contains(out.String(), line+"\n")
	}); err != nil {
		t.Fatal(err)
	}
}

func TestExitCodeAndOutput(t *testing.T) {
	t.Parallel()
	for _, give := range []int{0, 1, 3, 66} {
		t.Run(fmt.Sprint(give), func(t *testing.T) {
			t.Parallel()
			p, stdout, stderr := start(t, nil, "exit", fmt.Sprint(give))
			code, err := p.Wait(30 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code != give || p.ExitCode() != give {
				t.Fatalf("exit code %d, ExitCode() %d, want %d", code, p.ExitCode(), give)
			}
			if got := stdout.String(); got != "to stdout\n" {
				t.Errorf("stdout %q", got)
			}
			if got := stderr.String(); got != "to stderr\n" {
				t.Errorf("stderr %q", got)
			}
			var exit interface{ ExitCode() int }
			if gotErr := p.Err(); (give == 0) != (gotErr == nil) || (gotErr != nil && (!errors.As(gotErr, &exit) || exit.ExitCode() != give)) {
				t.Errorf("Err() = %v for exit %d", gotErr, give)
			}
		})
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	p, err := Start(Spec{Bin: child, Args: []string{"exit", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Name() != "child" {
		t.Errorf("Name() = %q, want the binary's base name", p.Name())
	}
	q, err := Start(Spec{Name: "replica-2", Bin: child, Args: []string{"exit", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if q.Name() != "replica-2" {
		t.Errorf("Name() = %q, want replica-2", q.Name())
	}
}

func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := Start(Spec{Name: "nothing", Bin: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "starting nothing") {
		t.Fatalf("Start of a missing binary: %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give []string
		want string
	}{
		{"defaults", nil, "A=\nGORACE=atexit_sleep_ms=0\n"},
		{"set", []string{"A=1"}, "A=1\nGORACE=atexit_sleep_ms=0\n"},
		{"last wins", []string{"A=1", "A=2", "GORACE=halt_on_error=1"}, "A=2\nGORACE=halt_on_error=1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, stdout, _ := start(t, tt.give, "env", "A", "GORACE")
			if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
				t.Fatalf("exit %d, %v", code, err)
			}
			if got := stdout.String(); got != tt.want {
				t.Errorf("env printed %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give syscall.Signal
		want int
		out  string
	}{
		{"SIGTERM", syscall.SIGTERM, 0, "ready\nterminated\n"},
		{"SIGINT", syscall.SIGINT, 130, "ready\ninterrupted\n"},
		{"SIGKILL", syscall.SIGKILL, -1, "ready\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, stdout, _ := start(t, nil, "serve")
			waitOutput(t, stdout, "ready")
			if p.Exited() || p.ExitCode() != -1 || p.Err() != nil {
				t.Fatalf("running child: Exited %v, ExitCode %d, Err %v", p.Exited(), p.ExitCode(), p.Err())
			}
			if err := p.Signal(tt.give); err != nil {
				t.Fatal(err)
			}
			code, err := p.Wait(30 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.want {
				t.Errorf("exit code %d after %s, want %d", code, tt.name, tt.want)
			}
			if got := stdout.String(); got != tt.out {
				t.Errorf("output %q, want %q", got, tt.out)
			}
			// Signalling an exited process is not an error.
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Errorf("signal after exit: %v", err)
			}
		})
	}
}

func TestWaitTimesOut(t *testing.T) {
	t.Parallel()
	p, stdout, _ := start(t, nil, "serve")
	waitOutput(t, stdout, "ready")
	code, err := p.Wait(100 * time.Millisecond)
	if !errors.Is(err, ErrRunning) || code != -1 {
		t.Fatalf("Wait on a running process: %d, %v; want -1 and ErrRunning", code, err)
	}
	if p.Exited() {
		t.Fatal("Wait's timeout ended the process")
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	t.Run("exits on SIGTERM", func(t *testing.T) {
		t.Parallel()
		p, stdout, _ := start(t, nil, "serve")
		waitOutput(t, stdout, "ready")
		if code, err := p.Stop(30 * time.Second); err != nil || code != 0 {
			t.Fatalf("Stop: %d, %v; want 0", code, err)
		}
	})
	t.Run("killed after the timeout", func(t *testing.T) {
		t.Parallel()
		p, stdout, _ := start(t, nil, "ignore-term")
		waitOutput(t, stdout, "ready")
		code, err := p.Stop(300 * time.Millisecond)
		if err != nil || code != -1 {
			t.Fatalf("Stop: %d, %v; want -1 (killed)", code, err)
		}
		if !p.Exited() {
			t.Fatal("Stop returned before the process was reaped")
		}
	})
}

func TestPeakRSS(t *testing.T) {
	t.Parallel()
	const mib = 64
	p, stdout, _ := start(t, nil, "alloc", fmt.Sprint(mib))
	waitOutput(t, stdout, "ready")
	running, err := p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if running < mib<<20 || running > 4*mib<<20 {
		t.Errorf("peak RSS while running %d MiB, want at least %d MiB and not absurdly more", running>>20, mib)
	}
	if code, err := p.Stop(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("Stop: %d, %v", code, err)
	}
	exited, err := p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	// The kernel's figure at reaping and VmHWM are kept apart and may
	// differ by its per-CPU counter batches, a few hundred KiB.
	if exited < mib<<20 || exited < running-4<<20 || exited > running+4<<20 {
		t.Errorf("peak RSS after exit %d KiB, want at least %d MiB and within 4 MiB of the %d KiB seen while running", exited>>10, mib, running>>10)
	}
}

func TestFreeAddrUnique(t *testing.T) {
	t.Parallel()
	const n = 300
	addrs := make([]*net.TCPAddr, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			a, err := FreeAddr()
			if err != nil {
				errs <- err
				return
			}
			addrs[i] = a
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, a := range addrs {
		if !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
			t.Errorf("address %s is not on 127.0.0.1", a)
		}
		if a.Port < 20000 || a.Port > 31999 {
			t.Errorf("port %d outside 20000-31999", a.Port)
		}
		if seen[a.Port] {
			t.Errorf("port %d handed out twice", a.Port)
		}
		seen[a.Port] = true
	}
	// The port is free for the caller to listen on.
	l, err := net.Listen("tcp", addrs[0].String())
	if err != nil {
		t.Fatalf("listening on a free address: %v", err)
	}
	_ = l.Close()
}

const exposition = `# HELP burnpoller_rpc_requests_total RPC requests.
# TYPE burnpoller_rpc_requests_total counter
burnpoller_rpc_requests_total{method="eth_getLogs",result="ok"} 52
burnpoller_rpc_requests_total{method="eth_getLogs",result="error"} 3
burnpoller_rpc_requests_total{method="eth_blockNumber",result="ok"} 212
burnpoller_lock_held 1
burnpoller_lock_held_seconds 2.5
burnpoller_ratio 1e-3
`

// metricsServer serves body at /metrics with status code and returns its
// address.
func metricsServer(t *testing.T, code int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestScrape(t *testing.T) {
	t.Parallel()
	addr := metricsServer(t, http.StatusOK, exposition)
	tests := []struct {
		name    string
		give    string
		want    float64
		wantErr error
	}{
		{"gauge", "burnpoller_lock_held", 1, nil},
		{"not a prefix match", "burnpoller_lock", 0, ErrNoSample},
		{"labels", `burnpoller_rpc_requests_total{method="eth_getLogs",result="error"}`, 3, nil},
		{"partial labels", `burnpoller_rpc_requests_total{method="eth_getLogs"`, 0, ErrNoSample},
		{"float", "burnpoller_lock_held_seconds", 2.5, nil},
		{"exponent", "burnpoller_ratio", 0.001, nil},
		{"missing", "burnpoller_nothing", 0, ErrNoSample},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Scrape(context.Background(), addr, tt.give)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Scrape(%s) error %v, want %v", tt.give, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Scrape(%s) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestScrapeSum(t *testing.T) {
	t.Parallel()
	addr := metricsServer(t, http.StatusOK, exposition)
	tests := []struct {
		name string
		give string
		want float64
	}{
		{"one method", `burnpoller_rpc_requests_total{method="eth_getLogs"`, 55},
		{"every label set", `burnpoller_rpc_requests_total{`, 267},
		{"name prefix takes longer names too", "burnpoller_lock_held", 3.5},
		{"none", "burnpoller_nothing", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ScrapeSum(context.Background(), addr, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ScrapeSum(%s) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestScrapeBy(t *testing.T) {
	t.Parallel()
	addr := metricsServer(t, http.StatusOK, exposition+`burnpoller_rpc_requests_total_other{method="eth_getLogs"} 7
burnpoller_rpc_requests_total{result="ok"} 1
`)
	tests := []struct {
		name   string
		metric string
		label  string
		want   map[string]float64
	}{
		{"by method, results summed", "burnpoller_rpc_requests_total", "method",
			map[string]float64{"eth_getLogs": 55, "eth_blockNumber": 212, "": 1}},
		{"by result", "burnpoller_rpc_requests_total", "result", map[string]float64{"ok": 265, "error": 3}},
		{"without labels", "burnpoller_lock_held", "method", map[string]float64{"": 1}},
		{"none", "burnpoller_nothing", "method", map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ScrapeBy(context.Background(), addr, tt.metric, tt.label)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("ScrapeBy(%s, %s) = %v, want %v", tt.metric, tt.label, got, tt.want)
			}
		})
	}
}

func TestScrapeFailures(t *testing.T) {
	t.Parallel()
	down, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		addr string
		want string
	}{
		{"server error", metricsServer(t, http.StatusInternalServerError, "burnpoller_lock_held 1\n"), "status 500"},
		{"nobody listening", down.String(), "connection refused"},
		{"bad value", metricsServer(t, http.StatusOK, "burnpoller_lock_held x\n"), "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Scrape(context.Background(), tt.addr, "burnpoller_lock_held"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Scrape: %v, want an error with %q", err, tt.want)
			}
			if _, err := ScrapeSum(context.Background(), tt.addr, "burnpoller_lock_held"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ScrapeSum: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestWaitFor(t *testing.T) {
	t.Parallel()
	t.Run("holds after a few checks", func(t *testing.T) {
		t.Parallel()
		checks := 0
		if err := WaitFor(context.Background(), 10*time.Second, "three checks", func() bool { checks++; return checks == 3 }); err != nil {
			t.Fatal(err)
		}
		if checks != 3 {
			t.Errorf("%d checks, want 3", checks)
		}
	})
	t.Run("times out", func(t *testing.T) {
		t.Parallel()
		err := WaitFor(context.Background(), 120*time.Millisecond, "never", func() bool { return false })
		if err == nil || err.Error() != "timed out after 120ms waiting for never" {
			t.Fatalf("WaitFor: %v", err)
		}
	})
	t.Run("context done", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := WaitFor(ctx, time.Hour, "never", func() bool { return false })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitFor: %v, want context.Canceled", err)
		}
	})
	t.Run("checked at least once", func(t *testing.T) {
		t.Parallel()
		if err := WaitFor(context.Background(), 0, "already true", func() bool { return true }); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPollerEnv(t *testing.T) {
	t.Parallel()
	contract := common.HexToAddress("0x00000000000000000000000000000000000000b0")
	tests := []struct {
		name     string
		give     Target
		settings []string
		want     []string
	}{
		{
			name: "poller defaults, no HTTP address",
			give: Target{DatabaseURL: "postgres://db", RPCURL: "http://node", ChainID: 1337, Contract: contract},
			want: []string{"DATABASE_URL=postgres://db", "RPC_URL=http://node", "CHAIN_ID=1337",
				"BURN_CONTRACT=0x00000000000000000000000000000000000000B0", "LOG_FORMAT=json"},
		},
		{
			name:     "HTTP address and settings",
			give:     Target{DatabaseURL: "postgres://db", RPCURL: "http://node", ChainID: 5, Contract: contract, HTTPAddr: "127.0.0.1:20001"},
			settings: []string{"POLL_INTERVAL=200ms", "CHAIN_ID=1"},
			want: []string{"DATABASE_URL=postgres://db", "RPC_URL=http://node", "CHAIN_ID=5",
				"BURN_CONTRACT=0x00000000000000000000000000000000000000B0", "HTTP_ADDR=127.0.0.1:20001", "LOG_FORMAT=json",
				"POLL_INTERVAL=200ms", "CHAIN_ID=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := PollerEnv(tt.give, tt.settings...); !slices.Equal(got, tt.want) {
				t.Errorf("PollerEnv:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestTestSettingsIsACopy(t *testing.T) {
	t.Parallel()
	a := TestSettings()
	a[0] = "changed"
	if b := TestSettings(); b[0] != "POLL_INTERVAL=200ms" {
		t.Fatalf("TestSettings shares its slice: %q", b[0])
	}
}
