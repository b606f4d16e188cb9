package database

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzRedact: how a connection string is shown (poller config, logs) never
// holds the password pgx parsed from it, nor a runtime parameter's name
// that may be a key (keyAsName: ?<key>=, or a key-like name).
func FuzzRedact(f *testing.F) {
	f.Add("postgres://u:pw@h/db")
	f.Add("postgres://u:pw@h:x/db")
	f.Add("host=h password='p w'")
	f.Add(`host=h password=first\ SECOND`)
	f.Add("postgres://u@h1,h2:5/db?password=Query-Pw")
	f.Add("postgres://u@h/db?Zx81kQ0pLmN2vB7c=")
	f.Add("postgres://u@h/db?Zx81kQ0pLmN2vB7c=1&application_name=a")
	f.Add("host=h Zx81kQ0pLmN2vB7c=1 password=p4ss")
	f.Add("host=h Zx81kQ0pLmN2vB7c='' search_path=x")
	f.Add("postgres://h/db?post=&prefer=")
	f.Fuzz(func(t *testing.T, dsn string) {
		pc, err := pgconn.ParseConfig(dsn)
		if err != nil {
			return
		}
		shown := Redact(dsn)
		keysShown(t, dsn, shown, pc)
		if len(pc.Password) < 4 || strings.Contains(pc.Password, redacted) {
			return
		}
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

// keysShown fails t if shown holds the name of a runtime parameter that may
// be a key, unless the same text is in a part that is shown: a host, a
// port, the user, the database, another parameter, or the words and
// settings every showing holds.
func keysShown(t *testing.T, dsn, shown string, pc *pgconn.Config) {
	t.Helper()
	public := []string{pc.Host, strconv.Itoa(int(pc.Port)), pc.User, pc.Database, "postgresql://", "host=", "port=", "user=",
		"password=", "dbname=", "sslmode=verify-full", "prefer", "disable", "allow", "require", "verify-ca", "connect_timeout=",
		"application_name"}
	for _, fb := range pc.Fallbacks {
		public = append(public, fb.Host, strconv.Itoa(int(fb.Port)))
	}
	for k, v := range pc.RuntimeParams {
		if !keyAsName(k, v) {
			public = append(public, k, v)
		}
	}
	for k, v := range pc.RuntimeParams {
		if keyAsName(k, v) && len(k) >= 4 && !strings.Contains(k, redacted) &&
			strings.Contains(shown, k) && !strings.Contains(strings.Join(public, "\n"), k) {
			t.Fatalf("shown %q for %q: the parameter name %q", shown, dsn, k)
		}
	}
}
