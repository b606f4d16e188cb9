package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzConfig feeds arbitrary values to the variables that need parsing: the
// loader must never panic, must name a real variable in every problem line,
// must never echo the database password, and a configuration it accepts has
// LOCK_WAIT and RPC_TIMEOUT that fit under TX_TIMEOUT. (database.FuzzRedact
// fuzzes how the database URL is shown.)
func FuzzConfig(f *testing.F) {
	f.Add("1337", "2s", "0x4b352ded1403ef22eb738f2ef72cef4349648fd9", "http://127.0.0.1:8545", "postgres://u:pw@h/db", "2000", "true", "", "")
	f.Add("", "", "", "", "", "", "", "", "")
	f.Add("-1", "5", "0x1234", "ftp://x", "postgres://u:pw@h:x/db", "0", "maybe", "5s", "6s")
	f.Add("18446744073709551616", "1h1h1h", "0X4B352DED1403EF22EB738F2EF72CEF4349648FD9", "http://a,http://b,", "host=h password='p w'", "-5", "1", "100ms", "")
	f.Add("1", "1s", "0x4b352ded1403ef22eb738f2ef72cef4349648fd9", "http://a", `host=h password=first\ SECOND`, "1", "false", "5s", "")
	f.Add("1", "1s", "0x4b352ded1403ef22eb738f2ef72cef4349648fd9", "http://a", "postgres://u@h1,h2:5/db?password=Query-Pw", "1", "false", "1h", "59m")
	f.Fuzz(func(t *testing.T, chainID, poll, contract, rpcURL, dbURL, maxRange, migrate, txTimeout, lockWait string) {
		if strings.ContainsRune(chainID+poll+contract+rpcURL+dbURL+maxRange+migrate+txTimeout+lockWait, 0) {
			t.Skip("an environment variable cannot hold a NUL byte")
		}
		env := map[string]string{
			"CHAIN_ID": chainID, "POLL_INTERVAL": poll, "BURN_CONTRACT": contract, "RPC_URL": rpcURL,
			"DATABASE_URL": dbURL, "MAX_BLOCK_RANGE": maxRange, "MIGRATE": migrate,
		}
		// Empty means unset, so that the derived defaults are fuzzed too.
		if txTimeout != "" {
			env["TX_TIMEOUT"] = txTimeout
		}
		if lockWait != "" {
			env["LOCK_WAIT"] = lockWait
		}
		setEnv(t, env)
		cfg, problems := Load(ScopeRun)
		known := map[string]bool{}
		ct := reflect.TypeFor[Config]()
		for i := range ct.NumField() {
			known[ct.Field(i).Tag.Get("envconfig")] = true
		}
		for _, p := range problems {
			key, _, _ := strings.Cut(p, ":")
			if !known[key] {
				t.Fatalf("problem %q does not name a variable", p)
			}
			if strings.Contains(dbURL, "pw") && strings.HasPrefix(p, "DATABASE_URL") && strings.Contains(p, "pw") {
				t.Fatalf("problem %q echoes the database URL", p)
			}
		}
		if len(problems) == 0 {
			if cfg.LockWait < 10*time.Millisecond || cfg.LockWait >= cfg.TxTimeout ||
				cfg.RPCTimeout < 10*time.Millisecond || cfg.RPCTimeout > cfg.TxTimeout {
				t.Fatalf("accepted LOCK_WAIT %s, RPC_TIMEOUT %s with TX_TIMEOUT %s", cfg.LockWait, cfg.RPCTimeout, cfg.TxTimeout)
			}
		}
	})
}
