package database

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestPoolConfig: DATABASE_EXEC_MODE sets how statements are sent unless
// the connection string names its own mode; DATABASE_MAX_CONNS bounds the
// pool; a connection that meets a read-only server (SQLSTATE 25006, a
// standby after a failover) or a FATAL error is dropped, any other error
// keeps it.
func TestPoolConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dsn, mode string
		want      pgx.QueryExecMode
	}{
		{"postgres://u:pw@h/db", "cache_describe", pgx.QueryExecModeCacheDescribe},
		{"postgres://u:pw@h/db", "exec", pgx.QueryExecModeExec},
		{"postgres://u:pw@h/db?default_query_exec_mode=simple_protocol", "cache_describe", pgx.QueryExecModeSimpleProtocol},
	}
	for _, tt := range tests {
		pc, _, err := poolConfig(tt.dsn, "DATABASE_URL", tt.mode, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		if pc.ConnConfig.DefaultQueryExecMode != tt.want {
			t.Fatalf("%s with %s: mode %v, want %v", tt.dsn, tt.mode, pc.ConnConfig.DefaultQueryExecMode, tt.want)
		}
		keep := pc.ConnConfig.OnPgError
		for _, e := range []struct {
			severity, code string
			keep           bool
		}{
			{"ERROR", "25006", false},
			{"FATAL", "57P01", false},
			{"ERROR", "23505", true},
			{"ERROR", "55P03", true},
		} {
			if got := keep(nil, &pgconn.PgError{Severity: e.severity, Code: e.code}); got != e.keep {
				t.Fatalf("%s %s: keep the connection = %v, want %v", e.severity, e.code, got, e.keep)
			}
		}
	}
	p, err := Open(t.Context(), Options{URL: "postgres://u:pw@h/db", ExecMode: "cache_describe", MaxConns: 7}, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Config().MaxConns != 7 {
		t.Fatalf("MaxConns %d, want 7", p.Config().MaxConns)
	}
	// A TLS file pgx cannot read is named; the password is not.
	_, _, err = poolConfig("postgres://u:secretpw@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem", "DATABASE_URL", "cache_describe", false, "test")
	if err == nil || !strings.Contains(err.Error(), "unable to read CA file") || strings.Contains(err.Error(), "secretpw") {
		t.Fatalf("error %v: want the CA file named, the password not", err)
	}
}
