package config

import (
	"bytes"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/poller"
)

// validEnv is a complete, valid configuration.
var validEnv = map[string]string{
	"DATABASE_URL":  "postgres://burn:pw@127.0.0.1:5432/burn",
	"RPC_URL":       "http://127.0.0.1:8545",
	"CHAIN_ID":      "1337",
	"BURN_CONTRACT": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
}

// setEnv clears every variable the config reads, then sets env.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		key := ct.Field(i).Tag.Get("envconfig")
		if key == "" {
			continue
		}
		t.Setenv(key, "")
		os.Unsetenv(key)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

func with(overrides map[string]string) map[string]string { return withEnv(validEnv, overrides) }

// withEnv is base with overrides applied: a value "<unset>" removes the
// variable.
func withEnv(base, overrides map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range base {
		env[k] = v
	}
	for k, v := range overrides {
		if v == "<unset>" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	return env
}

func TestValidConfigHasNoProblemsAndDefaults(t *testing.T) {
	setEnv(t, validEnv)
	cfg, problems := Load(ScopeRun)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if cfg.Finality != "finalized" || cfg.MaxBlockRange != 2000 || !cfg.Migrate || cfg.HTTPAddr != ":8080" || cfg.StartBlock != 0 {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if got, want := cfg.GroupCursor(), "1337:0x5fbdb2315678afecb367f032d93f642f64180aa3"; got != want {
		t.Fatalf("cursor id = %q, want %q", got, want)
	}
}

// TestEveryBadValueIsNamed sets one bad value at a time and expects exactly
// one problem line naming that variable.
func TestEveryBadValueIsNamed(t *testing.T) {
	tests := []struct {
		key, value string
	}{
		{"DATABASE_URL", "<unset>"},
		{"DATABASE_URL", "postgres://a:b@host:notaport/db"},
		{"DATABASE_URL", "postgres://a:b@host/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"},
		{"DATABASE_DIRECT_URL", "postgres://a:b@host:notaport/db"},
		{"DATABASE_EXEC_MODE", "prepared"},
		{"DATABASE_MAX_CONNS", "0"},
		{"DATABASE_MAX_CONNS", "many"},
		{"RPC_URL", "<unset>"},
		{"RPC_URL", "ftp://node.example"},
		{"RPC_URL", "node.example:8545"},
		{"RPC_WS_URL", "http://node.example:8546"},
		{"RPC_WS_URL", "not a url"},
		{"CHAIN_ID", "<unset>"},
		{"CHAIN_ID", "0"},
		{"CHAIN_ID", "-1"},
		{"CHAIN_ID", "abc"},
		{"CHAIN_ID", "18446744073709551615"},
		{"BURN_CONTRACT", "<unset>"},
		{"BURN_CONTRACT", "0x1234"},
		{"BURN_CONTRACT", "5FbDB2315678afecb367f032d93F642f64180aa3"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aA3"},
		{"BURN_CONTRACT", "0x0000000000000000000000000000000000000000"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3,"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3,0x5fbdb2315678afecb367f032d93f642f64180aa3"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3@"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3@-1"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3@12k"},
		{"BURN_CONTRACT", "0x5FbDB2315678afecb367f032d93F642f64180aa3,0x1234@5"},
		{"RPC_QUORUM", "0"},
		{"RPC_QUORUM", "2"},
		{"RPC_QUORUM", "two"},
		{"VERIFY_RECEIPTS", "perhaps"},
		{"ALLOW_CONTRACT_REMOVAL", "yes please"},
		{"START_BLOCK", "-5"},
		{"START_BLOCK", "18446744073709551615"},
		{"CURSOR_ID", "has space"},
		{"CURSOR_ID", strings.Repeat("x", 201)},
		{"FINALITY", "final"},
		{"CONFIRMATIONS", "ten"},
		{"CONFIRMATIONS", "1000000"},
		{"POLL_INTERVAL", "5"},
		{"POLL_INTERVAL", "0s"},
		{"POLL_INTERVAL", "2h"},
		{"MAX_BLOCK_RANGE", "0"},
		{"MAX_BLOCK_RANGE", "2000000"},
		{"LOCK_WAIT", "1ms"},
		{"LOCK_WAIT", "40s"},
		{"TX_TIMEOUT", "10ms"},
		{"TX_TIMEOUT", "soon"},
		{"RPC_TIMEOUT", "0s"},
		{"RPC_TIMEOUT", "1m"},
		{"HTTP_ADDR", "8080"},
		{"HTTP_ADDR", ":http-alt"},
		{"SHUTDOWN_TIMEOUT", "0s"},
		{"SHUTDOWN_TIMEOUT", "1h"},
		{"LOG_LEVEL", "verbose"},
		{"LOG_FORMAT", "xml"},
		{"MIGRATE", "maybe"},
		{"PENDING", "sometimes"},
		{"PENDING_MAX_BLOCKS", "0"},
		{"WEBHOOK_SECRET", "short"},
		{"WEBHOOK_EVENTS", "paid"},
		{"WEBHOOK_EVENTS", ""},
		{"WEBHOOK_TIMEOUT", "1ms"},
		{"WEBHOOK_MAX_AGE", "100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			setEnv(t, with(map[string]string{tt.key: tt.value}))
			_, problems := Load(ScopeRun)
			if len(problems) != 1 {
				t.Fatalf("%d problems, want 1: %q", len(problems), problems)
			}
			if !strings.HasPrefix(problems[0], tt.key+":") {
				t.Fatalf("problem %q does not name %s", problems[0], tt.key)
			}
		})
	}
}

func TestWebhookProblems(t *testing.T) {
	for _, tt := range []struct {
		give map[string]string
		want string
	}{
		{map[string]string{"WEBHOOK_URL": "https://h.example/in/TOKEN9"}, "WEBHOOK_SECRET: required"},
		{map[string]string{"WEBHOOK_URL": "ftp://h.example/in/TOKEN9", "WEBHOOK_SECRET": "0123456789abcdefZQXV"}, "WEBHOOK_URL: entry 1: scheme"},
		{map[string]string{"WEBHOOK_URL": "https://h.example/a/TOKEN9,https://h.example/a/TOKEN9", "WEBHOOK_SECRET": "0123456789abcdefZQXV"}, "WEBHOOK_URL: entry 2 repeats"},
	} {
		setEnv(t, with(tt.give))
		_, problems := Load(ScopeRun)
		if len(problems) != 1 || !strings.HasPrefix(problems[0], tt.want) || strings.Contains(problems[0], "TOKEN9") || strings.Contains(problems[0], "ZQXV") {
			t.Errorf("%v: problems %q, want one starting %q without the URL or secret", tt.give, problems, tt.want)
		}
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	setEnv(t, map[string]string{"CHAIN_ID": "x", "POLL_INTERVAL": "5", "LOG_FORMAT": "xml"})
	_, problems := Load(ScopeRun)
	want := []string{"CHAIN_ID", "POLL_INTERVAL", "DATABASE_URL", "LOG_FORMAT", "RPC_URL", "BURN_CONTRACT"}
	if len(problems) != len(want) {
		t.Fatalf("problems = %q, want one each for %v", problems, want)
	}
	for _, key := range want {
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p, key+":")
		}
		if !found {
			t.Errorf("no problem names %s: %q", key, problems)
		}
	}
	// Loading never changes the environment (it is not unset and restored
	// around the bad values either): another goroutine reading it
	// meanwhile sees what was set.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			if os.Getenv("CHAIN_ID") != "x" || os.Getenv("POLL_INTERVAL") != "5" {
				t.Errorf("the environment changed while the configuration loaded")
				return
			}
		}
	}()
	for range 20 {
		Load(ScopeRun)
	}
	<-done
}

func TestMigrateNeedsOnlyTheDatabase(t *testing.T) {
	setEnv(t, map[string]string{"DATABASE_URL": validEnv["DATABASE_URL"]})
	if _, problems := Load(ScopeMigrate); len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
}

// configRow returns the line of `poller config` output for key.
func configRow(t *testing.T, out, key string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, key+" ") {
			return line
		}
	}
	t.Fatalf("poller config does not list %s:\n%s", key, out)
	return ""
}

// TestConfigCommandRedactsSecrets runs `poller config` with passwords in
// every place they can be and checks none of them shows, while the
// non-secret parts do.
func TestConfigCommandRedactsSecrets(t *testing.T) {
	const hook = `INSERT INTO credits SELECT * FROM dblink('host=ledger user=app password=Hook-Pw-31337', 'SELECT 1') AS t(x int) WHERE $1 > 0`
	tests := []struct {
		name    string
		give    map[string]string
		want    map[string]string // key: text its row must hold
		secrets []string
	}{
		{
			name: "URL, API key, hook",
			give: map[string]string{
				"DATABASE_URL":     "postgres://burn:db-s3cret-pw@127.0.0.1:5432/burn",
				"RPC_URL":          "https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef",
				"PAYMENT_HOOK_SQL": hook,
			},
			want: map[string]string{
				"DATABASE_URL":     "postgres://burn:xxxxx@127.0.0.1:5432/burn?sslmode=prefer",
				"RPC_URL":          "https://mainnet.infura.io/v3/xxxxx",
				"PAYMENT_HOOK_SQL": "(set, redacted)",
			},
			secrets: []string{"db-s3cret-pw", "0123456789abcdef0123456789abcdef", "Hook-Pw-31337", "dblink", "credits"},
		},
		{
			name: "key=value, escaped space",
			give: map[string]string{"DATABASE_URL": `host=127.0.0.1 user=burn password=Alpha7\ Bravo9 dbname=burn`},
			want: map[string]string{
				"DATABASE_URL":     "host=127.0.0.1 port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer",
				"PAYMENT_HOOK_SQL": "(default)",
			},
			secrets: []string{"Alpha7", "Bravo9"},
		},
		{
			name: "webhooks",
			give: map[string]string{
				"WEBHOOK_URL":    "https://u:hook-pw@hooks.example.com/in/tok-0123456789,http://127.0.0.1:9000/x?key=tok-abcdef",
				"WEBHOOK_SECRET": "whsec-0123456789-secret",
			},
			want: map[string]string{
				"WEBHOOK_URL":    "https://hooks.example.com#fc163617,http://127.0.0.1:9000#1de0d7c4",
				"WEBHOOK_SECRET": "(set, redacted)",
			},
			secrets: []string{"hook-pw", "tok-0123456789", "tok-abcdef", "whsec-0123456789-secret"},
		},
		{
			name: "bare keys",
			give: map[string]string{
				"RPC_URL":        "https://node.example/rpc?Zx81kQ0pLmN2vB7c,https://other.example/v1?chain=1&BareKey0123abcd",
				"RPC_WS_URL":     "wss://node.example/ws?Ws0Key0123456789",
				"DATABASE_URL":   "postgres://burn@127.0.0.1/burn?Db0Key0123456789=",
				"WEBHOOK_URL":    "https://hooks.example.com/in?Hook0Key0123456",
				"WEBHOOK_SECRET": "whsec-0123456789-secret",
			},
			want: map[string]string{
				"RPC_URL":      "https://node.example/rpc?xxxxx,https://other.example/v1?chain=xxxxx&xxxxx",
				"RPC_WS_URL":   "wss://node.example/ws?xxxxx",
				"DATABASE_URL": "postgres://burn@127.0.0.1:5432/burn?sslmode=prefer&xxxxx=xxxxx",
			},
			secrets: []string{"Zx81kQ0pLmN2vB7c", "BareKey0123abcd", "Ws0Key0123456789", "Db0Key0123456789", "Hook0Key0123456"},
		},
		{
			name:    "key=value, quoted",
			give:    map[string]string{"DATABASE_URL": "host=127.0.0.1 user=burn password='quoted secret' dbname=burn"},
			want:    map[string]string{"DATABASE_URL": "host=127.0.0.1 port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer"},
			secrets: []string{"quoted", "secret'"},
		},
		{
			name:    "key=value, doubled quote",
			give:    map[string]string{"DATABASE_URL": "host=127.0.0.1 user=burn password = 'it''s' dbname=burn"},
			want:    map[string]string{"DATABASE_URL": "(unparseable, redacted)"},
			secrets: []string{"it''s", "'s'"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, with(tt.give))
			pgtest.ClearPGEnv(t, nil)
			var stdout bytes.Buffer
			_, problems := Load(ScopeRun)
			if err := Print(&stdout); err != nil {
				t.Fatal(err)
			}
			out := stdout.String() + strings.Join(problems, "\n")
			if want := tt.want["DATABASE_URL"] == "(unparseable, redacted)"; (len(problems) > 0) != want {
				t.Fatalf("problems %q, want some: %v", problems, want)
			}
			for _, secret := range tt.secrets {
				if strings.Contains(out, secret) {
					t.Errorf("poller config prints %q:\n%s", secret, out)
				}
			}
			for key, want := range tt.want {
				if row := configRow(t, stdout.String(), key); !strings.Contains(row, " "+want+" ") {
					t.Errorf("%s row = %q, want it to show %q", key, row, want)
				}
			}
			ct := reflect.TypeFor[Config]()
			for i := range ct.NumField() {
				if key := ct.Field(i).Tag.Get("envconfig"); key != "" {
					configRow(t, stdout.String(), key)
				}
			}
		})
	}
}

// TestTimeoutDefaultsFollowTxTimeout: LOCK_WAIT and RPC_TIMEOUT left unset
// are derived from TX_TIMEOUT and always fit under it; only values the user
// set are refused.
func TestTimeoutDefaultsFollowTxTimeout(t *testing.T) {
	tests := []struct {
		name         string
		give         map[string]string
		wantLockWait time.Duration
		wantRPC      time.Duration
		wantProblem  string // the variable the one problem names; "" for none
	}{
		{name: "defaults", give: nil, wantLockWait: 5 * time.Second, wantRPC: 10 * time.Second},
		{name: "TX_TIMEOUT=5s alone", give: map[string]string{"TX_TIMEOUT": "5s"}, wantLockWait: 833 * time.Millisecond, wantRPC: 1666 * time.Millisecond},
		{name: "TX_TIMEOUT=100ms, the least", give: map[string]string{"TX_TIMEOUT": "100ms"}, wantLockWait: 16 * time.Millisecond, wantRPC: 33 * time.Millisecond},
		{name: "TX_TIMEOUT=1m keeps the caps", give: map[string]string{"TX_TIMEOUT": "1m"}, wantLockWait: 5 * time.Second, wantRPC: 10 * time.Second},
		{name: "TX_TIMEOUT=12s", give: map[string]string{"TX_TIMEOUT": "12s"}, wantLockWait: 2 * time.Second, wantRPC: 4 * time.Second},
		{name: "user LOCK_WAIT under a short TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "5s", "LOCK_WAIT": "4s"}, wantLockWait: 4 * time.Second, wantRPC: 1666 * time.Millisecond},
		{name: "user RPC_TIMEOUT equal to TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "5s", "RPC_TIMEOUT": "5s"}, wantLockWait: 833 * time.Millisecond, wantRPC: 5 * time.Second},
		{name: "user LOCK_WAIT above TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "5s", "LOCK_WAIT": "6s"}, wantProblem: "LOCK_WAIT"},
		{name: "user LOCK_WAIT equal to TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "5s", "LOCK_WAIT": "5s"}, wantProblem: "LOCK_WAIT"},
		{name: "user default LOCK_WAIT under a short TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "2s", "LOCK_WAIT": "5s"}, wantProblem: "LOCK_WAIT"},
		{name: "user RPC_TIMEOUT above TX_TIMEOUT", give: map[string]string{"TX_TIMEOUT": "5s", "RPC_TIMEOUT": "6s"}, wantProblem: "RPC_TIMEOUT"},
		{name: "user RPC_TIMEOUT too short", give: map[string]string{"RPC_TIMEOUT": "5ms"}, wantProblem: "RPC_TIMEOUT"},
		{name: "TX_TIMEOUT too short: one problem", give: map[string]string{"TX_TIMEOUT": "10ms"}, wantProblem: "TX_TIMEOUT"},
		{name: "TX_TIMEOUT too long: one problem", give: map[string]string{"TX_TIMEOUT": "2h"}, wantProblem: "TX_TIMEOUT"},
		{name: "TX_TIMEOUT unparseable: one problem", give: map[string]string{"TX_TIMEOUT": "soon"}, wantProblem: "TX_TIMEOUT"},
		{name: "LOCK_WAIT unparseable: one problem", give: map[string]string{"TX_TIMEOUT": "5s", "LOCK_WAIT": "soon"}, wantProblem: "LOCK_WAIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, with(tt.give))
			cfg, problems := Load(ScopeRun)
			if tt.wantProblem != "" {
				if len(problems) != 1 || !strings.HasPrefix(problems[0], tt.wantProblem+":") {
					t.Fatalf("problems = %q, want one naming %s", problems, tt.wantProblem)
				}
				return
			}
			if len(problems) > 0 {
				t.Fatalf("problems: %q", problems)
			}
			if cfg.LockWait != tt.wantLockWait || cfg.RPCTimeout != tt.wantRPC {
				t.Fatalf("LOCK_WAIT, RPC_TIMEOUT = %s, %s; want %s, %s", cfg.LockWait, cfg.RPCTimeout, tt.wantLockWait, tt.wantRPC)
			}
			if cfg.LockWait >= cfg.TxTimeout || cfg.RPCTimeout > cfg.TxTimeout {
				t.Fatalf("LOCK_WAIT %s, RPC_TIMEOUT %s do not fit under TX_TIMEOUT %s", cfg.LockWait, cfg.RPCTimeout, cfg.TxTimeout)
			}
		})
	}
}

// TestConfigCommandShowsDerivedDefaults: `poller config` shows the value a
// derived default takes, and how it is derived.
func TestConfigCommandShowsDerivedDefaults(t *testing.T) {
	setEnv(t, with(map[string]string{"TX_TIMEOUT": "5s", "RPC_TIMEOUT": "2s"}))
	var stdout bytes.Buffer
	if err := Print(&stdout); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][]string{
		"LOCK_WAIT":   {"min(5s, TX_TIMEOUT/6)", "(default) 833ms"},
		"RPC_TIMEOUT": {"min(10s, TX_TIMEOUT/3)", " 2s "},
		"TX_TIMEOUT":  {" 30s ", " 5s "},
	} {
		row := configRow(t, stdout.String(), key)
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("%s row = %q, want it to show %q", key, row, w)
			}
		}
	}
}

// TestSeveralContracts: BURN_CONTRACT lists contracts with optional first
// blocks; the first names the group, so a group keeps its cursor when
// contracts are added after it; a new group starts at the earliest first
// block.
func TestSeveralContracts(t *testing.T) {
	a, b := "0x5FbDB2315678afecb367f032d93F642f64180aa3", "0xcb23799ee42e61a7206c8c87f67b3d89de1adff2"
	tests := []struct {
		value, start string
		wantCursor   string
		wantFirst    []int64
		wantStart    int64
	}{
		{a, "0", "1337:0x5fbdb2315678afecb367f032d93f642f64180aa3", []int64{0}, 0},
		{a + "," + b + "@19000000", "0", "1337:0x5fbdb2315678afecb367f032d93f642f64180aa3", []int64{0, 19000000}, 0},
		{" " + a + "@100 , " + b + "@50", "7", "1337:0x5fbdb2315678afecb367f032d93f642f64180aa3", []int64{100, 50}, 50},
		{b + "," + a, "9", "1337:" + b, []int64{9, 9}, 9},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			setEnv(t, with(map[string]string{"BURN_CONTRACT": tt.value, "START_BLOCK": tt.start}))
			cfg, problems := Load(ScopeRun)
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			if got := cfg.GroupCursor(); got != tt.wantCursor {
				t.Fatalf("cursor id %q, want %q", got, tt.wantCursor)
			}
			var first []int64
			for _, ct := range cfg.Contracts() {
				first = append(first, ct.FirstBlock(cfg.StartBlock))
			}
			if !reflect.DeepEqual(first, tt.wantFirst) {
				t.Fatalf("first blocks %v, want %v", first, tt.wantFirst)
			}
			if got := poller.GroupStart(cfg.Contracts(), cfg.StartBlock); got != tt.wantStart {
				t.Fatalf("a new group starts at %d, want %d", got, tt.wantStart)
			}
		})
	}
}

// TestChainDefaults: a well-known CHAIN_ID gives FINALITY and
// MAX_BLOCK_RANGE from the table when they are unset, `poller config` says
// where they came from, and a value the user set wins. Unknown chains keep
// the variables' defaults.
func TestChainDefaults(t *testing.T) {
	for _, id := range []string{"1", "10", "42161", "43114", "324"} {
		t.Run(id, func(t *testing.T) {
			setEnv(t, with(map[string]string{"CHAIN_ID": id}))
			cfg, problems := Load(ScopeRun)
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			d, _ := chain.KnownChain(cfg.ChainID)
			if cfg.Finality != string(d.Finality) || cfg.MaxBlockRange != d.MaxBlockRange {
				t.Fatalf("FINALITY %s, MAX_BLOCK_RANGE %d; want the table's %s, %d", cfg.Finality, cfg.MaxBlockRange, d.Finality, d.MaxBlockRange)
			}
			if got := cfg.MaxRange(); got != rangeGrowTo {
				t.Fatalf("ranges grow to %d, want %d: the table's size is only the first", got, rangeGrowTo)
			}
			var stdout bytes.Buffer
			if err := Print(&stdout); err != nil {
				t.Fatal(err)
			}
			row := configRow(t, stdout.String(), "MAX_BLOCK_RANGE")
			if !strings.Contains(row, "("+d.Name+") "+strconv.FormatUint(d.MaxBlockRange, 10)) || !strings.Contains(row, d.Reason) {
				t.Fatalf("MAX_BLOCK_RANGE row %q does not say it came from the %s table", row, d.Name)
			}
		})
	}
	setEnv(t, with(map[string]string{"CHAIN_ID": "8453", "MAX_BLOCK_RANGE": "300", "FINALITY": "safe"}))
	cfg, problems := Load(ScopeRun)
	if len(problems) > 0 || cfg.MaxBlockRange != 300 || cfg.Finality != "safe" {
		t.Fatalf("set values lost: %d %s %v", cfg.MaxBlockRange, cfg.Finality, problems)
	}
	if got := cfg.MaxRange(); got != 300 {
		t.Fatalf("ranges grow to %d; MAX_BLOCK_RANGE=300 set by the user is the most", got)
	}
	setEnv(t, with(map[string]string{"CHAIN_ID": "31337"}))
	cfg, _ = Load(ScopeRun)
	if cfg.MaxBlockRange != 2000 || cfg.MaxRange() != rangeGrowTo || cfg.Finality != "finalized" || cfg.Confirmations != 12 || len(cfg.fromChain) != 0 {
		t.Fatalf("an unknown chain got %+v", cfg)
	}
}
