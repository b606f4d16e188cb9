package database

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzRedact: how a connection string is shown (poller config, logs) never
// holds the password pgx parsed from it.
func FuzzRedact(f *testing.F) {
	f.Add("postgres://u:pw@h/db")
	f.Add("postgres://u:pw@h:x/db")
	f.Add("host=h password='p w'")
	f.Add(`host=h password=first\ SECOND`)
	f.Add("postgres://u@h1,h2:5/db?password=Query-Pw")
	f.Fuzz(func(t *testing.T, dsn string) {
		pc, err := pgconn.ParseConfig(dsn)
		if err != nil || len(pc.Password) < 4 || strings.Contains(pc.Password, redacted) {
			return
		}
		shown := Redact(dsn)
		// The password may equal another part by chance (a host named
		// like it, or a piece of the word "password"): only a showing
		// that comes from the password itself counts. The view never
		// holds the password, only the redaction mark.
		v := viewDSN(pc)
		if strings.Contains(shown, pc.Password) && !strings.Contains(v.keywordValue()+v.url("postgres"), pc.Password) {
			t.Fatalf("shown %q for %q: the password %q", shown, dsn, pc.Password)
		}
	})
}
