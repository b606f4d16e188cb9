package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	contractA = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
	contractB = "0xcb23799ee42e61a7206c8c87f67b3d89de1adff2"
)

// groupsEnv is a valid configuration of two groups, eth and base.
func groupsEnv() map[string]string {
	return map[string]string{
		"DATABASE_URL":       "postgres://burn:pw@127.0.0.1:5432/burn",
		"GROUPS":             "eth,base",
		"ETH_RPC_URL":        "http://127.0.0.1:8545,http://127.0.0.1:8546",
		"ETH_CHAIN_ID":       "1337",
		"ETH_BURN_CONTRACT":  contractA,
		"BASE_RPC_URL":       "http://127.0.0.1:9545",
		"BASE_CHAIN_ID":      "1338",
		"BASE_BURN_CONTRACT": contractB + "@100",
	}
}

func withGroups(overrides map[string]string) map[string]string {
	return withEnv(groupsEnv(), overrides)
}

// TestGroupsReadTheirVariablesUnderTheirPrefix: each group reads its own
// variables under its name, a shared variable falls back to the unprefixed
// one unless the group sets its own, derived values follow each group's
// own, and the process's variables are the process's.
func TestGroupsReadTheirVariablesUnderTheirPrefix(t *testing.T) {
	setEnv(t, withGroups(map[string]string{
		"POLL_INTERVAL":      "1s",
		"BASE_POLL_INTERVAL": "3s",
		"BASE_TX_TIMEOUT":    "12s",
		"ETH_CURSOR_ID":      "eth-main",
		"HTTP_ADDR":          ":9090",
	}))
	set, problems := Load(ScopeServe)
	if len(problems) > 0 {
		t.Fatalf("problems: %q", problems)
	}
	if !set.Named() || len(set.Groups) != 2 || set.Groups[0].Name != "eth" || set.Groups[1].Name != "base" {
		t.Fatalf("groups %+v", set.Groups)
	}
	eth, base := set.Groups[0], set.Groups[1]
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"eth chain", eth.ChainID, uint64(1337)},
		{"base chain", base.ChainID, uint64(1338)},
		{"eth endpoints", eth.RPCURLs(), []string{"http://127.0.0.1:8545", "http://127.0.0.1:8546"}},
		{"eth cursor", eth.GroupCursor(), "eth-main"},
		{"base cursor", base.GroupCursor(), "1338:0xcb23799ee42e61a7206c8c87f67b3d89de1adff2"},
		{"base first block", base.Contracts()[0].FirstBlock(base.StartBlock), int64(100)},
		{"eth poll interval (shared)", eth.PollInterval, time.Second},
		{"base poll interval (own)", base.PollInterval, 3 * time.Second},
		{"eth lock wait (derived from 30s)", eth.LockWait, 5 * time.Second},
		{"base lock wait (derived from its 12s)", base.LockWait, 2 * time.Second},
		{"process HTTP_ADDR in a group", base.HTTPAddr, ":9090"},
		{"process database", set.DatabaseURL, "postgres://burn:pw@127.0.0.1:5432/burn"},
		{"a pool for every group: 2 each + 2", set.DatabaseMaxConns, int32(6)},
		{"the groups' pools are the process's", eth.DatabaseMaxConns, int32(6)},
		{"the webhook deliveries' pool keeps 4", set.WebhookDatabase().MaxConns, int32(4)},
	} {
		if fmt.Sprint(tt.got) != fmt.Sprint(tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if v := eth.Var("RPC_URL"); v != "ETH_RPC_URL" {
		t.Errorf("eth's RPC_URL is %s", v)
	}
}

// TestBadGroupsConfiguration: each mistake with GROUPS is one line naming
// the variable (and so the group), and they are all told at once.
func TestBadGroupsConfiguration(t *testing.T) {
	tests := []struct {
		name  string
		give  map[string]string
		scope Scope
		want  []string
	}{
		{name: "a name that is not a prefix", give: map[string]string{"GROUPS": "eth,base-2"},
			want: []string{`GROUPS: "base-2" is not a valid prefix: a group's name is 1-20 letters and digits, starting with a letter (it prefixes the group's variables: ETH_RPC_URL)`}},
		{name: "a name that reads a variable of burnpoller", give: map[string]string{"GROUPS": "eth,rpc"},
			want: []string{`GROUPS: "rpc" is not a valid prefix: RPC_COMPUTE_UNITS is a variable of burnpoller, not group rpc's; choose another name`}},
		{name: "a name twice", give: map[string]string{"GROUPS": "eth,base,ETH"},
			want: []string{`GROUPS: "eth" is listed twice`}},
		{name: "an empty entry", give: map[string]string{"GROUPS": "eth,,base"},
			want: []string{`GROUPS: entry 2 is empty`}},
		{name: "two groups with one cursor", give: map[string]string{"BASE_CHAIN_ID": "1337", "BASE_BURN_CONTRACT": contractA},
			want: []string{"BASE_BURN_CONTRACT: groups eth and base have the same cursor (1337:0x5fbdb2315678afecb367f032d93f642f64180aa3); each group needs its own: remove one, or give it a CURSOR_ID of its own"}},
		{name: "two groups with one CURSOR_ID", give: map[string]string{"ETH_CURSOR_ID": "c", "BASE_CURSOR_ID": "c"},
			want: []string{"BASE_CURSOR_ID: groups eth and base have the same cursor (c); each group needs its own: remove one, or give it a CURSOR_ID of its own"}},
		{name: "a group with no contracts", give: map[string]string{"BASE_BURN_CONTRACT": "<unset>"},
			want: []string{"BASE_BURN_CONTRACT: required, the contract's 0x address"}},
		{name: "variables of a group not in GROUPS", give: map[string]string{"POLY_RPC_URL": "http://x:1", "POLY_CHAIN_ID": "137"},
			want: []string{
				"POLY_CHAIN_ID: group poly is not in GROUPS (eth,base); add it to GROUPS or unset POLY_CHAIN_ID",
				"POLY_RPC_URL: group poly is not in GROUPS (eth,base); add it to GROUPS or unset POLY_RPC_URL",
			}},
		{name: "a group's own variable unprefixed", give: map[string]string{"RPC_URL": "http://x:1"},
			want: []string{"RPC_URL: with GROUPS each group sets its own (ETH_RPC_URL, BASE_RPC_URL); unset RPC_URL"}},
		{name: "a shared variable bad for every group", give: map[string]string{"POLL_INTERVAL": "5"},
			want: []string{`POLL_INTERVAL: "5" is not a duration such as 500ms, 2s or 1m (groups eth, base)`}},
		{name: "a group's own value bad", give: map[string]string{"ETH_POLL_INTERVAL": "0s"},
			want: []string{"ETH_POLL_INTERVAL: 0s is not between 10ms and 1h"}},
		{name: "a group's own value unparseable", give: map[string]string{"BASE_CHAIN_ID": "base"},
			want: []string{`BASE_CHAIN_ID: "base" is not a whole number >= 0`}},
		{name: "a shared value bad for one group", give: map[string]string{"RPC_QUORUM": "2"},
			want: []string{"RPC_QUORUM: 2 is not between 1 and the number of BASE_RPC_URL endpoints (1) (group base)"}},
		{name: "a pool too small for the groups", scope: ScopeServe, give: map[string]string{"DATABASE_MAX_CONNS": "4"},
			want: []string{"DATABASE_MAX_CONNS: 4 is less than 2 per group + 2 (6 with 2 groups): a group whose node hangs could hold a connection another group needs; leave it unset or raise it"}},
		{name: "a small pool for a one-group command", scope: ScopeRun, give: map[string]string{"DATABASE_MAX_CONNS": "4"}},
		{name: "all at once", give: map[string]string{"ETH_POLL_INTERVAL": "0s", "BASE_BURN_CONTRACT": "<unset>", "CHAIN_ID": "1", "LOG_LEVEL": "loud", "ARB_BURN_CONTRACT": contractA},
			want: []string{
				"LOG_LEVEL: \"loud\" is not one of debug, info, warn, error",
				"ETH_POLL_INTERVAL: 0s is not between 10ms and 1h",
				"BASE_BURN_CONTRACT: required, the contract's 0x address",
				"CHAIN_ID: with GROUPS each group sets its own (ETH_CHAIN_ID, BASE_CHAIN_ID); unset CHAIN_ID",
				"ARB_BURN_CONTRACT: group arb is not in GROUPS (eth,base); add it to GROUPS or unset ARB_BURN_CONTRACT",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, withGroups(tt.give))
			_, problems := Load(tt.scope)
			if !slices.Equal(problems, tt.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestMisspeltVariablesAreWarned: a variable under a group's prefix that
// is none of its variables, one a letter off a variable's name, and a
// group's variable without GROUPS are named in a warning, so that a typo
// is not mistaken for a default.
func TestMisspeltVariablesAreWarned(t *testing.T) {
	t.Run("with GROUPS", testMisspeltWithGroups)
	t.Run("without GROUPS", testMisspeltWithoutGroups)
}

func testMisspeltWithGroups(t *testing.T) {
	setEnv(t, withGroups(map[string]string{"ETH_RPC_ULR": "http://x:1", "BASE_FINALTY": "safe", "POLL_INTERVALL": "1s"}))
	set, problems := Load(ScopeRun)
	if len(problems) > 0 {
		t.Fatalf("problems: %q", problems)
	}
	want := []string{
		"BASE_FINALTY is not a variable of group base; did you mean BASE_FINALITY?",
		"ETH_RPC_ULR is not a variable of group eth; did you mean ETH_RPC_URL?",
		"POLL_INTERVALL is not a variable of burnpoller; did you mean POLL_INTERVAL?",
	}
	if got := ours(set.Warnings); !slices.Equal(got, want) {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func testMisspeltWithoutGroups(t *testing.T) {
	setEnv(t, with(map[string]string{"ETH_RPC_URL": "http://x:1", "RPC_ULR": "http://x:1"}))
	set, problems := Load(ScopeRun)
	if len(problems) > 0 {
		t.Fatalf("problems: %q", problems)
	}
	want := []string{
		"ETH_RPC_URL reads as a variable of group eth, but GROUPS is not set: it is ignored",
		"RPC_ULR is not a variable of burnpoller; did you mean RPC_URL?",
	}
	if got := ours(set.Warnings); !slices.Equal(got, want) {
		t.Fatalf("warnings without GROUPS:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// ours are the warnings about the variables these tests set (the machine
// running them may have variables of its own).
func ours(warnings []string) []string {
	var out []string
	for _, w := range warnings {
		for _, v := range []string{"ETH_", "BASE_", "POLL_INTERVALL", "RPC_ULR"} {
			if strings.HasPrefix(w, v) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// TestPrintShowsEveryGroup: `poller config` with GROUPS shows the
// process's variables, then each group's under its prefixed names, with
// where each value came from, secrets redacted.
func TestPrintShowsEveryGroup(t *testing.T) {
	setEnv(t, withGroups(map[string]string{
		"POLL_INTERVAL":    "1s",
		"ETH_RPC_URL":      "https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef",
		"BASE_TX_TIMEOUT":  "12s",
		"PAYMENT_HOOK_SQL": "SELECT 'hook-secret'",
	}))
	var out bytes.Buffer
	if err := Print(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, secret := range []string{"0123456789abcdef0123456789abcdef", "hook-secret", ":pw@"} {
		if strings.Contains(s, secret) {
			t.Errorf("poller config prints %q:\n%s", secret, s)
		}
	}
	for key, want := range map[string]string{
		"GROUPS":                "eth,base",
		"DATABASE_MAX_CONNS":    "(default) 6",
		"ETH_RPC_URL":           "https://mainnet.infura.io/v3/xxxxx",
		"ETH_POLL_INTERVAL":     "(POLL_INTERVAL) 1s",
		"BASE_POLL_INTERVAL":    "(POLL_INTERVAL) 1s",
		"BASE_TX_TIMEOUT":       " 12s ",
		"BASE_LOCK_WAIT":        "(default) 2s",
		"ETH_LOCK_WAIT":         "(default) 5s",
		"BASE_CHAIN_ID":         " 1338 ",
		"ETH_PAYMENT_HOOK_SQL":  "(PAYMENT_HOOK_SQL) (set, redacted)",
		"BASE_MAX_BLOCK_RANGE":  "(default)",
		"BASE_CURSOR_ID":        "(default)",
		"ETH_ALLOW_HOOK_CHANGE": "(default)",
	} {
		if row := configRow(t, s, key); !strings.Contains(row, want) {
			t.Errorf("%s row = %q, want it to show %q", key, row, want)
		}
	}
	for _, unprefixed := range []string{"RPC_URL", "CHAIN_ID", "POLL_INTERVAL"} {
		for line := range strings.Lines(s) {
			if strings.HasPrefix(line, unprefixed+" ") {
				t.Errorf("with GROUPS the process's rows list the group variable %s: %q", unprefixed, line)
			}
		}
	}
	if !strings.Contains(s, "group eth") || !strings.Contains(s, "group base") {
		t.Errorf("no section per group:\n%s", s)
	}
}
