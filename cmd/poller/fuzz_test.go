package main

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzConfig feeds arbitrary values to the variables that need parsing: the
// loader must never panic, must name a real variable in every problem line,
// and must never echo the database password.
func FuzzConfig(f *testing.F) {
	f.Add("1337", "2s", "0x4b352ded1403ef22eb738f2ef72cef4349648fd9", "http://127.0.0.1:8545", "postgres://u:pw@h/db", "2000", "true")
	f.Add("", "", "", "", "", "", "")
	f.Add("-1", "5", "0x1234", "ftp://x", "postgres://u:pw@h:x/db", "0", "maybe")
	f.Add("18446744073709551616", "1h1h1h", "0X4B352DED1403EF22EB738F2EF72CEF4349648FD9", "http://a,http://b,", "host=h password='p w'", "-5", "1")
	f.Fuzz(func(t *testing.T, chainID, poll, contract, rpcURL, dbURL, maxRange, migrate string) {
		if strings.ContainsRune(chainID+poll+contract+rpcURL+dbURL+maxRange+migrate, 0) {
			t.Skip("an environment variable cannot hold a NUL byte")
		}
		setEnv(t, map[string]string{
			"CHAIN_ID": chainID, "POLL_INTERVAL": poll, "BURN_CONTRACT": contract, "RPC_URL": rpcURL,
			"DATABASE_URL": dbURL, "MAX_BLOCK_RANGE": maxRange, "MIGRATE": migrate,
		})
		_, problems := loadConfig(scopeRun)
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
	})
}
