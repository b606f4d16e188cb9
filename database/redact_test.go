package database_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// secretForms is every way secret could show: as given, URL-escaped, and
// each of its space-separated parts.
func secretForms(secret string) []string {
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.UserPassword("u", secret).String()[2:]}
	forms = append(forms, strings.Fields(secret)...)
	return forms
}

// TestRedact shows a connection string as pgx resolves it, in
// the form it was given, with no trace of the password.
func TestRedact(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		env     map[string]string
		want    string
		secrets []string
	}{
		{
			name:    "URL user info",
			give:    "postgres://burn:s3cretUserInfo@db:5432/burn",
			want:    "postgres://burn:xxxxx@db:5432/burn?sslmode=prefer",
			secrets: []string{"s3cretUserInfo"},
		},
		{
			name:    "URL password in the query",
			give:    "postgres://burn@db/burn?password=s3cretQuery&sslmode=require",
			want:    "postgres://burn:xxxxx@db:5432/burn?sslmode=require",
			secrets: []string{"s3cretQuery"},
		},
		{
			name:    "URL password in the query only, no user",
			give:    "postgresql://db/burn?password=s3cretNoUser",
			want:    "postgresql://envuser:xxxxx@db:5432/burn?sslmode=prefer",
			secrets: []string{"s3cretNoUser"},
		},
		{
			name:    "URL percent-encoded password",
			give:    "postgres://burn:Pct%40Secret%20Two%2Fthree@db/burn",
			want:    "postgres://burn:xxxxx@db:5432/burn?sslmode=prefer",
			secrets: []string{"Pct@Secret Two/three", "Pct%40Secret%20Two%2Fthree"},
		},
		{
			name:    "URL several hosts",
			give:    "postgres://burn:s3cretMulti@db1:5432,db2:5433,[::1]:5434/burn?sslmode=disable&application_name=burnpoller",
			want:    "postgres://burn:xxxxx@db1:5432,db2:5433,[::1]:5434/burn?application_name=burnpoller&sslmode=disable",
			secrets: []string{"s3cretMulti"},
		},
		{
			name:    "URL socket directory",
			give:    "postgres://burn:s3cretSocket@/burn?host=/var/run/postgresql",
			want:    "postgres://burn:xxxxx@/burn?host=%2Fvar%2Frun%2Fpostgresql&port=5432&sslmode=disable",
			secrets: []string{"s3cretSocket"},
		},
		{
			name: "URL verification and timeout",
			give: "postgres://burn@db/burn?sslmode=verify-full&connect_timeout=10",
			want: "postgres://burn@db:5432/burn?connect_timeout=10&sslmode=verify-full",
		},
		{
			name:    "URL TLS key password",
			give:    "postgres://burn@db/burn?sslpassword=s3cretTLSKey",
			want:    "postgres://burn@db:5432/burn?sslmode=prefer",
			secrets: []string{"s3cretTLSKey"},
		},
		{
			name:    "URL misspelt password key",
			give:    "postgres://burn@db/burn?passwd=s3cretTypo",
			want:    "postgres://burn@db:5432/burn?passwd=xxxxx&sslmode=prefer",
			secrets: []string{"s3cretTypo"},
		},
		{
			name:    "URL key as a parameter's name",
			give:    "postgres://burn@db/burn?Zx81kQ0pLmN2vB7c=&application_name=burnpoller",
			want:    "postgres://burn@db:5432/burn?application_name=burnpoller&sslmode=prefer&xxxxx=xxxxx",
			secrets: []string{"Zx81kQ0pLmN2vB7c"},
		},
		{
			name:    "URL key-like name with a value",
			give:    "postgres://burn@db/burn?0123456789abcdef0123=1",
			want:    "postgres://burn@db:5432/burn?sslmode=prefer&xxxxx=xxxxx",
			secrets: []string{"0123456789abcdef0123"},
		},
		{
			name:    "key=value key as a parameter's name",
			give:    "host=db user=burn Zx81kQ0pLmN2vB7c=1 search_path=ledger",
			want:    "host=db port=5432 user=burn search_path=ledger sslmode=prefer xxxxx=xxxxx",
			secrets: []string{"Zx81kQ0pLmN2vB7c"},
		},
		{
			name:    "key=value plain",
			give:    "host=db user=burn password=s3cretPlain dbname=burn",
			want:    "host=db port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer",
			secrets: []string{"s3cretPlain"},
		},
		{
			name:    "key=value escaped space",
			give:    `host=db user=burn password=first\ SECOND dbname=burn`,
			want:    "host=db port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer",
			secrets: []string{"first SECOND", `first\ SECOND`},
		},
		{
			name:    "key=value quoted with a space",
			give:    "host=db user=burn password='alpha beta' dbname=burn",
			want:    "host=db port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer",
			secrets: []string{"alpha beta"},
		},
		{
			name:    "key=value quoted with escapes, spaces around =",
			give:    `host=db user=burn password = 'gam\'ma\\delta' dbname=burn`,
			want:    "host=db port=5432 user=burn password=xxxxx dbname=burn sslmode=prefer",
			secrets: []string{`gam'ma\delta`, `gam\'ma`, "gam", "delta"},
		},
		{
			name:    "key=value doubled quote (not libpq syntax)",
			give:    "host=db user=burn password = 'it''s' dbname=burn",
			want:    "(unparseable, redacted)",
			secrets: []string{"it''s", "it's", "'s'"},
		},
		{
			name:    "key=value unterminated quote",
			give:    "host=db user=burn password='s3cretOpen dbname=burn",
			want:    "(unparseable, redacted)",
			secrets: []string{"s3cretOpen"},
		},
		{
			name:    "key=value several hosts and runtime parameters",
			give:    "host=db1,db2 port=5432,5433 user=burn password=s3cretKV dbname=burn application_name='my app' search_path=ledger sslmode=require",
			want:    "host=db1,db2 port=5432,5433 user=burn password=xxxxx dbname=burn application_name='my app' search_path=ledger sslmode=require",
			secrets: []string{"s3cretKV"},
		},
		{
			name:    "key=value misspelt password key",
			give:    "host=db user=burn pasword=s3cretMisspelt",
			want:    "host=db port=5432 user=burn pasword=xxxxx sslmode=prefer",
			secrets: []string{"s3cretMisspelt"},
		},
		{
			name:    "password from PGPASSWORD",
			give:    "host=db dbname=burn",
			env:     map[string]string{"PGPASSWORD": "s3cretFromEnv"},
			want:    "host=db port=5432 user=envuser password=xxxxx dbname=burn sslmode=prefer",
			secrets: []string{"s3cretFromEnv"},
		},
		{
			name: "no password",
			give: "postgres://db/burn",
			want: "postgres://envuser@db:5432/burn?sslmode=prefer",
		},
		{
			name:    "bad port",
			give:    "postgres://burn:s3cretBadPort@db:notaport/burn",
			want:    "(unparseable, redacted)",
			secrets: []string{"s3cretBadPort"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pgtest.ClearPGEnv(t, tt.env)
			got := database.Redact(tt.give)
			if got != tt.want {
				t.Errorf("database.Redact(%q) = %q, want %q", tt.give, got, tt.want)
			}
			for _, s := range tt.secrets {
				for _, form := range secretForms(s) {
					if strings.Contains(got, form) {
						t.Errorf("database.Redact(%q) = %q shows %q of the password", tt.give, got, form)
					}
				}
			}
		})
	}
}
