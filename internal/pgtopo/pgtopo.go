// Package pgtopo starts real Postgres topologies on this machine for
// integration tests: a single server (Standalone), a primary with a
// streaming standby that can be failed over (NewPair), a PgBouncer in
// transaction pooling mode in front of a server (NewBouncer), and a server
// that requires TLS with a certificate from a CA made in the test (NewTLS).
//
// It follows the conventions of package pgtest: the binaries are found on
// PATH or in /usr/lib/postgresql/*/bin; Postgres refuses to run as root, so
// as root every server program (initdb, pg_ctl, pg_basebackup, pgbouncer)
// runs as user postgres through `runuser -u postgres --`, in temporary
// directories owned by that user; ports come from pgtest.FreeAddr. Where a
// prerequisite is missing (the binaries, the postgres user), a constructor
// skips the test, except in CI (pgtest.CI), where it fails it instead.
//
// Every constructor registers the teardown (stop the processes, delete the
// files) with t.Cleanup.
package pgtopo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/internal/pgtest"
)

// Server is one throwaway Postgres server, in a temporary directory that is
// removed when the test that made it ends.
type Server struct {
	dir     string // temporary directory: data/, log, the socket
	port    int
	bin     string // directory of the Postgres binaries
	os      osUser
	sslmode string // sslmode in URL: "disable", or "require" for a TLSServer
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// URL is the URL of database db on the server as user postgres, who needs
// no password (trust authentication):
// postgres://postgres@127.0.0.1:PORT/db?sslmode=disable. For the Server of a
// TLSServer, sslmode is require instead, since the server refuses plain
// connections.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=%s", s.port, url.PathEscape(db), s.sslmode)
}

// Kill stops the server with pg_ctl stop -m immediate: like a crash,
// in-flight transactions are aborted and clients lose their connections.
// Stopping a server that is not running does nothing.
func (s *Server) Kill() {
	_ = s.command(s.binary("pg_ctl"), "-D", s.dataDir(), "-m", "immediate", "-w", "-t", "60", "stop").Run()
}

// Start starts the server again after Kill, on the same port, and waits
// until it accepts connections (for a primary, that includes crash
// recovery). A primary started again after a Failover is a second primary:
// the test decides what that means.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-p %d -k %s", s.port, s.dir)
	cmd := s.command(s.binary("pg_ctl"), "-D", s.dataDir(), "-l", s.logFile(), "-o", opts, "-w", "-t", "60", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtopo: pg_ctl start: %w: %s\n%s", err, out, s.Log())
	}
	return nil
}

// Promote promotes a standby to primary with pg_ctl promote -w, which
// returns once the server has left recovery.
func (s *Server) Promote() error {
	cmd := s.command(s.binary("pg_ctl"), "-D", s.dataDir(), "-w", "-t", "60", "promote")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtopo: pg_ctl promote: %w: %s\n%s", err, out, s.Log())
	}
	return nil
}

// Exec runs sql (one or more statements, by the simple protocol) in
// database db as user postgres, and fails t if that fails.
func (s *Server) Exec(t testing.TB, db, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatalf("pgtopo: connecting to port %d: %v", s.port, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtopo: on port %d: %s: %v", s.port, sql, err)
	}
}

// Log returns the contents of the server's log, for failure messages.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	return string(b)
}

// Standalone starts a server that can be a primary: wal_level=replica,
// max_wal_senders=10, hot_standby=on, fsync=off, max_connections=200,
// listening on 127.0.0.1 only, with trust authentication for every user and
// for replication from 127.0.0.1. It is stopped and deleted when t ends.
func Standalone(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, primaryHBA, "")
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// primaryHBA lets everyone in without a password over the socket and from
// 127.0.0.1, for replication too.
const primaryHBA = `local all all trust
local replication all trust
host all all 127.0.0.1/32 trust
host replication all 127.0.0.1/32 trust
`

// baseConf is appended to every server's postgresql.conf; pg_basebackup
// copies it to a standby. The port and socket directory are not in it:
// Start passes them, so that a standby's differ from its primary's.
const baseConf = `
# pgtopo
listen_addresses = '127.0.0.1'
max_connections = 200
fsync = off
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
hot_standby = on
wal_log_hints = on
wal_receiver_status_interval = 1s
hot_standby_feedback = on
log_line_prefix = '%m [%p] %q%a '
log_connections = off
`

// newServer makes the directory of a server and initialises its data
// directory with hba as pg_hba.conf and baseConf plus conf appended to
// postgresql.conf, without starting it. Missing prerequisites stop t (see
// stop).
func newServer(t testing.TB, hba, conf string) *Server {
	t.Helper()
	s := &Server{bin: binDirOrStop(t), os: osUserOrStop(t), sslmode: "disable"}
	s.dir = s.os.tempDir(t, "pgtopo-pg-")
	t.Cleanup(func() {
		s.Kill()
		_ = os.RemoveAll(s.dir)
	})
	out, err := s.command(s.binary("initdb"), "-D", s.dataDir(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		t.Fatalf("pgtopo: initdb: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(s.dataDir(), "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := appendFile(filepath.Join(s.dataDir(), "postgresql.conf"), baseConf+conf); err != nil {
		t.Fatal(err)
	}
	s.port = freePort(t)
	return s
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "log") }

func (s *Server) binary(name string) string { return filepath.Join(s.bin, name) }

func (s *Server) command(name string, args ...string) *exec.Cmd { return s.os.command(name, args...) }

// osUser is the operating-system user the server programs run as.
type osUser struct {
	name     string // "" for the current user
	uid, gid int
}

// command runs name as u: through runuser when u is another user.
func (u osUser) command(name string, args ...string) *exec.Cmd {
	if u.name != "" {
		return exec.Command("runuser", append([]string{"-u", u.name, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// tempDir makes a temporary directory owned by u. The caller removes it.
func (u osUser) tempDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.chown(dir); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	return dir
}

// chown gives path to u, when u is another user than the current one.
func (u osUser) chown(path string) error {
	if u.name == "" {
		return nil
	}
	return os.Chown(path, u.uid, u.gid)
}

// writeFile writes a file owned by u.
func (u osUser) writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(path, mode); err != nil {
		return err
	}
	return u.chown(path)
}

// osUserOrStop returns the user the server programs run as: the current
// user, or postgres when that is root.
func osUserOrStop(t testing.TB) osUser {
	t.Helper()
	if os.Geteuid() != 0 {
		return osUser{}
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		stop(t, fmt.Errorf("running as root needs a postgres user: %w", err))
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if _, err := exec.LookPath("runuser"); err != nil {
		stop(t, fmt.Errorf("running as root needs runuser: %w", err))
	}
	return osUser{name: "postgres", uid: uid, gid: gid}
}

// binDirOrStop finds the directory of the Postgres binaries as pgtest
// does: that of pg_ctl on PATH, else the newest /usr/lib/postgresql/*/bin.
// A pg_ctl on PATH may be a lone symbolic link (/usr/local/bin/pg_ctl, say),
// so the link is followed, and the directory must hold initdb and
// pg_basebackup too.
func binDirOrStop(t testing.TB) string {
	t.Helper()
	complete := func(dir string) bool {
		for _, name := range []string{"pg_ctl", "initdb", "pg_basebackup"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && complete(filepath.Dir(real)) {
			return filepath.Dir(real)
		}
	}
	var matches []string
	globbed, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	for _, m := range globbed {
		if complete(filepath.Dir(m)) {
			matches = append(matches, m)
		}
	}
	if len(matches) == 0 {
		stop(t, errors.New("no pg_ctl, initdb and pg_basebackup together on PATH or in /usr/lib/postgresql/*/bin"))
	}
	// Sort numerically so that 9 comes before 10.
	best, bestVersion := matches[0], -1
	for _, m := range matches {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(m))))
		if v > bestVersion {
			best, bestVersion = m, v
		}
	}
	return filepath.Dir(best)
}

// stop stops t for a missing prerequisite, as pgtest does: it fails t in CI
// (pgtest.CI), where a test must not pass by not running, and skips it
// elsewhere.
func stop(t testing.TB, err error) {
	t.Helper()
	if pgtest.CI() {
		t.Fatalf("pgtopo: a prerequisite is missing, and CI=true forbids skipping: %v", err)
	}
	t.Skip("pgtopo: a prerequisite is missing:", err)
}

func freePort(t testing.TB) int {
	t.Helper()
	addr, err := pgtest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr.Port
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// queryRow runs a query returning one row on s and scans it into dest.
func (s *Server) queryRow(ctx context.Context, db, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// poll calls check every 50ms until it reports done, fails t with the last
// error when timeout passes first. what names the wait in the failure.
func poll(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) (bool, error), logs ...*Server) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		done, err := check(ctx)
		cancel()
		if err == nil && done {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, s := range logs {
				fmt.Fprintf(&b, "\n--- log of the server on port %d:\n%s", s.port, s.Log())
			}
			t.Fatalf("pgtopo: %s: not after %v (last error: %v)%s", what, timeout, last, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
