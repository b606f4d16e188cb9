package main

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
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

func with(overrides map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range validEnv {
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
	cfg, problems := loadConfig(scopeRun)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	if cfg.Finality != "finalized" || cfg.MaxBlockRange != 2000 || !cfg.Migrate || cfg.HTTPAddr != ":8080" || cfg.StartBlock != 0 {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
	if got, want := cfg.cursorID(), "1337:0x5fbdb2315678afecb367f032d93f642f64180aa3"; got != want {
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
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			setEnv(t, with(map[string]string{tt.key: tt.value}))
			_, problems := loadConfig(scopeRun)
			if len(problems) != 1 {
				t.Fatalf("%d problems, want 1: %q", len(problems), problems)
			}
			if !strings.HasPrefix(problems[0], tt.key+":") {
				t.Fatalf("problem %q does not name %s", problems[0], tt.key)
			}
		})
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	setEnv(t, map[string]string{"CHAIN_ID": "x", "POLL_INTERVAL": "5", "LOG_FORMAT": "xml"})
	_, problems := loadConfig(scopeRun)
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
	// The unparseable values were restored after parsing.
	if os.Getenv("CHAIN_ID") != "x" {
		t.Fatalf("CHAIN_ID not restored: %q", os.Getenv("CHAIN_ID"))
	}
}

func TestMigrateNeedsOnlyTheDatabase(t *testing.T) {
	setEnv(t, map[string]string{"DATABASE_URL": validEnv["DATABASE_URL"]})
	if _, problems := loadConfig(scopeMigrate); len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
}

func TestRedactDatabaseURL(t *testing.T) {
	tests := []struct{ give, want string }{
		{"postgres://burn:s3cret@db:5432/burn", "postgres://burn:xxxxx@db:5432/burn"},
		{"postgres://burn@db/burn?password=s3cret&sslmode=require", "postgres://burn@db/burn?password=xxxxx&sslmode=require"},
		{"host=db user=burn password=s3cret dbname=burn", "host=db user=burn password=xxxxx dbname=burn"},
		{"host=db password='s3 cret' dbname=burn", "host=db password=xxxxx dbname=burn"},
		{"postgres://db/burn", "postgres://db/burn"},
		{"postgres://burn@db/burn?sslpassword=s3cret", "postgres://burn@db/burn?sslpassword=xxxxx"},
	}
	for _, tt := range tests {
		if got := redactDatabaseURL(tt.give); got != tt.want {
			t.Errorf("redactDatabaseURL(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestConfigCommandRedactsSecrets(t *testing.T) {
	setEnv(t, with(map[string]string{
		"DATABASE_URL": "postgres://burn:db-s3cret-pw@127.0.0.1:5432/burn",
		"RPC_URL":      "https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef",
	}))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"config"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	for _, secret := range []string{"db-s3cret-pw", "0123456789abcdef0123456789abcdef"} {
		if strings.Contains(out, secret) {
			t.Fatalf("poller config prints %q:\n%s", secret, out)
		}
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		key := ct.Field(i).Tag.Get("envconfig")
		if key != "" && !strings.Contains(out, key) {
			t.Errorf("poller config does not list %s", key)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"bogus"}, exitUsage},
		{[]string{"run", "extra"}, exitUsage},
		{[]string{"version"}, exitOK},
		{[]string{"help"}, exitOK},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != tt.want {
			t.Errorf("poller %v: exit %d, want %d (%s)", tt.args, code, tt.want, stderr.String())
		}
	}
	setEnv(t, nil)
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("poller with no config: exit %d, want %d", code, exitUsage)
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 4 {
		t.Fatalf("want one line for each of the 4 required variables, got:\n%s", stderr.String())
	}
}
