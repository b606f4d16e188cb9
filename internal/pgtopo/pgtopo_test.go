package pgtopo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStandalone(t *testing.T) {
	t.Parallel()
	s := Standalone(t)
	s.Exec(t, "postgres", "CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
	conn := connect(t, s.URL("postgres"))
	var n int
	var walLevel string
	if err := conn.QueryRow(ctx(t), "SELECT sum(n)::int, current_setting('wal_level') FROM t").Scan(&n, &walLevel); err != nil {
		t.Fatal(err)
	}
	if n != 1 || walLevel != "replica" {
		t.Fatalf("got n=%d wal_level=%s, want 1 and replica", n, walLevel)
	}
	if !strings.Contains(s.Log(), "database system is ready") {
		t.Errorf("log lacks the ready line:\n%s", s.Log())
	}

	s.Kill()
	if c, err := pgx.Connect(ctx(t), s.URL("postgres")); err == nil {
		_ = c.Close(context.Background())
		t.Fatal("a killed server still accepts connections")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	s.Exec(t, "postgres", "INSERT INTO t VALUES (2)")
}

func TestPair(t *testing.T) {
	t.Parallel()
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			t.Parallel()
			p := NewPair(t, sync)
			p.CreateDatabase(t, "app")
			p.Primary.Exec(t, "app", "CREATE TABLE payments (id int PRIMARY KEY); INSERT INTO payments VALUES (42)")
			p.WaitReplayed(t)

			standby := connect(t, p.Standby.URL("app"))
			var id int
			var inRecovery bool
			if err := standby.QueryRow(ctx(t), "SELECT id, pg_is_in_recovery() FROM payments").Scan(&id, &inRecovery); err != nil {
				t.Fatal(err)
			}
			if id != 42 || !inRecovery {
				t.Fatalf("standby: id=%d in recovery=%v, want 42 and true", id, inRecovery)
			}
			if _, err := standby.Exec(ctx(t), "INSERT INTO payments VALUES (43)"); err == nil {
				t.Fatal("the standby accepted a write")
			}

			primary := connect(t, p.Primary.URL("postgres"))
			var state string
			if err := primary.QueryRow(ctx(t), "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'").Scan(&state); err != nil {
				t.Fatal(err)
			}
			want := map[bool]string{false: "async", true: "sync"}[sync]
			if state != want {
				t.Fatalf("sync_state = %q, want %q", state, want)
			}
		})
	}
}

func TestFailover(t *testing.T) {
	t.Parallel()
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			t.Parallel()
			p := NewPair(t, sync)
			p.CreateDatabase(t, "app")
			p.Primary.Exec(t, "app", "CREATE TABLE payments (id int PRIMARY KEY); INSERT INTO payments VALUES (1)")
			if sync {
				// A synchronous commit is on the standby once it returns.
				p.Primary.Exec(t, "app", "INSERT INTO payments VALUES (2)")
			} else {
				p.WaitReplayed(t)
			}

			before := connect(t, p.MultiHostURL("app"))
			if got := before.PgConn().Conn().RemoteAddr().String(); !strings.HasSuffix(got, fmt.Sprintf(":%d", p.Primary.Port())) {
				t.Fatalf("multi-host URL reached %s before the failover, want the primary (port %d)", got, p.Primary.Port())
			}

			p.Failover(t)

			if c, err := pgx.Connect(ctx(t), p.Primary.URL("app")); err == nil {
				_ = c.Close(context.Background())
				t.Fatal("the killed primary still accepts connections")
			}
			p.Standby.Exec(t, "app", "INSERT INTO payments VALUES (3)")

			conn := connect(t, p.MultiHostURL("app"))
			if got := conn.PgConn().Conn().RemoteAddr().String(); !strings.HasSuffix(got, fmt.Sprintf(":%d", p.Standby.Port())) {
				t.Fatalf("multi-host URL reached %s, want the new primary (port %d)", got, p.Standby.Port())
			}
			if _, err := conn.Exec(ctx(t), "INSERT INTO payments VALUES (4)"); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := conn.QueryRow(ctx(t), "SELECT count(*) FROM payments").Scan(&n); err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{false: 3, true: 4}[sync]
			if n != want {
				t.Fatalf("%d payments on the new primary, want %d", n, want)
			}
		})
	}
}

func TestBouncer(t *testing.T) {
	t.Parallel()
	s := Standalone(t)
	b := NewBouncer(t, s)
	if v := b.Version(); !strings.HasPrefix(v, "PgBouncer") {
		t.Errorf("Version() = %q, want PgBouncer …", v)
	}
	t.Logf("%s", b.Version())
	s.Exec(t, "postgres", "CREATE TABLE t (n int)")

	conn := connect(t, b.URL("postgres"))
	var one int
	if err := conn.QueryRow(ctx(t), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 through the bouncer: %d, %v\n%s", one, err, b.Log())
	}
	for i := range 2 {
		tx, err := conn.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx(t), "SELECT pg_advisory_xact_lock(7)"); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx(t), fmt.Sprintf("INSERT INTO t VALUES (%d)", i)); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.QueryRow(ctx(t), "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("count through the bouncer: %d, %v", n, err)
	}

	// Queries with arguments work when pgx does not cache prepared
	// statements (see Bouncer).
	exec := connect(t, b.URL("postgres")+"&default_query_exec_mode=exec")
	for i := range 5 {
		var got int
		if err := exec.QueryRow(ctx(t), "SELECT $1::int + count(*)::int FROM t", i).Scan(&got); err != nil || got != i+2 {
			t.Fatalf("query with an argument through the bouncer: %d, %v", got, err)
		}
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	s := NewTLS(t)

	conn := connect(t, s.VerifyFullURL("postgres"))
	var ssl bool
	if err := conn.QueryRow(ctx(t), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Fatal("verify-full connection is not encrypted")
	}
	s.Exec(t, "postgres", "SELECT 1") // Server.URL: sslmode=require

	other := fmt.Sprintf("postgres://postgres@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s", s.Port(), s.OtherCAFile)
	_, err := pgx.Connect(ctx(t), other)
	if err == nil {
		t.Fatal("verify-full against an unrelated CA connected")
	}
	if msg := err.Error(); !strings.Contains(msg, "x509") && !strings.Contains(msg, "certificate") {
		t.Fatalf("verify-full against an unrelated CA: %v, want a certificate error", err)
	}

	plain := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port())
	_, err = pgx.Connect(ctx(t), plain)
	if err == nil {
		t.Fatal("a plain connection was accepted")
	}
	if !strings.Contains(err.Error(), "pg_hba.conf") {
		t.Logf("plain connection refused with: %v", err)
	}
}
