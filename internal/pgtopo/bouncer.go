package pgtopo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bouncer is a PgBouncer in transaction pooling mode in front of a Server:
// a server connection belongs to a client only for the length of a
// transaction, so session state (SET, session advisory locks, named
// prepared statements) does not carry from one transaction to the next.
//
// PgBouncer before 1.21 (Debian 12 has 1.18) knows nothing of protocol-level
// prepared statements: through it, pgx must not use its default
// statement cache. Add default_query_exec_mode=exec (or simple_protocol) to
// URL for queries with arguments: with the default, concurrent clients get
// "prepared statement ... already exists" and "... does not exist" errors.
// An application_name in the URL does reach the server: PgBouncer tracks
// that parameter itself, ignore_startup_parameters notwithstanding.
type Bouncer struct {
	dir     string
	port    int
	binary  string
	os      osUser
	version string
}

// NewBouncer starts a PgBouncer in front of s for every database
// (`* = host=127.0.0.1 port=P`), with pool_mode=transaction,
// auth_type=trust (user postgres, whom the server trusts too),
// max_client_conn=500, default_pool_size=20, ignore_startup_parameters
// extra_float_digits, options and application_name (pgx sends some of them),
// listening on a free port of 127.0.0.1 and on no Unix socket, logging to a
// file in its directory. It returns once the bouncer accepts connections;
// it is stopped and its directory removed when t ends.
//
// The binary is pgbouncer on PATH or /usr/sbin/pgbouncer (Debian's package
// pgbouncer). Where it is missing and the test runs as root, NewBouncer
// tries `apt-get install -y -q pgbouncer`, once per test binary; where that
// fails too, it stops t (see the package documentation).
func NewBouncer(t testing.TB, s *Server) *Bouncer {
	t.Helper()
	bin := pgbouncerOrStop(t)
	b := &Bouncer{binary: bin, os: s.os}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("pgtopo: pgbouncer --version: %v: %s", err, out)
	}
	b.version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	b.dir = b.os.tempDir(t, "pgtopo-bouncer-")
	t.Cleanup(func() {
		b.stop()
		_ = os.RemoveAll(b.dir)
	})
	b.port = freePort(t)
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options,application_name
logfile = %s
pidfile = %s
server_login_retry = 1
`, s.port, b.port, b.file("userlist.txt"), b.logFile(), b.pidFile())
	// With auth_type trust the user must still be in auth_file.
	if err := b.os.writeFile(b.file("userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.os.writeFile(b.file("pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	// -d: it daemonises, writes its pid file, and stop signals that pid.
	if out, err := b.os.command(bin, "-d", b.file("pgbouncer.ini")).CombinedOutput(); err != nil {
		t.Fatalf("pgtopo: starting pgbouncer: %v: %s\n%s", err, out, b.Log())
	}
	poll(t, 20*time.Second, "pgbouncer accepting connections", func(ctx context.Context) (bool, error) {
		conn, err := pgx.Connect(ctx, b.URL("postgres"))
		if err != nil {
			return false, err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "SELECT 1")
		return err == nil, err
	})
	return b
}

// URL is the URL of database db through the bouncer as user postgres:
// postgres://postgres@127.0.0.1:BPORT/db?sslmode=disable.
func (b *Bouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", b.port, url.PathEscape(db))
}

// Port is the bouncer's TCP port on 127.0.0.1.
func (b *Bouncer) Port() int { return b.port }

// Version is the first line of `pgbouncer --version`, such as
// "PgBouncer 1.18.0".
func (b *Bouncer) Version() string { return b.version }

// Log returns the contents of the bouncer's log file, for failure messages.
func (b *Bouncer) Log() string {
	out, err := os.ReadFile(b.logFile())
	if err != nil {
		return fmt.Sprintf("(no pgbouncer log: %v)", err)
	}
	return string(out)
}

func (b *Bouncer) file(name string) string { return filepath.Join(b.dir, name) }
func (b *Bouncer) logFile() string         { return b.file("pgbouncer.log") }
func (b *Bouncer) pidFile() string         { return b.file("pgbouncer.pid") }

// stop ends the bouncer this test started, by the pid in its pid file,
// and waits up to 10 seconds for it to go.
func (b *Bouncer) stop() {
	raw, err := os.ReadFile(b.pidFile())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return
	}
	// SIGINT: PgBouncer's "safe shutdown" waits for clients; SIGTERM
	// closes everything at once, which is what a test's end wants.
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

var (
	installOnce sync.Once
	installErr  error
)

// pgbouncerOrStop finds the pgbouncer binary, installing Debian's package
// once if it is missing and the test runs as root, or stops t.
func pgbouncerOrStop(t testing.TB) string {
	t.Helper()
	if p, err := findPgbouncer(); err == nil {
		return p
	}
	installOnce.Do(func() { installErr = installPgbouncer() })
	p, err := findPgbouncer()
	if err != nil {
		if installErr != nil {
			err = fmt.Errorf("%w; installing it: %w", err, installErr)
		}
		stop(t, err)
	}
	return p
}

func findPgbouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("no pgbouncer on PATH or at /usr/sbin/pgbouncer")
}

// installPgbouncer installs Debian's package pgbouncer with apt-get,
// updating the package lists first if the first try fails. Any system
// pgbouncer service the package starts is left alone: the bouncers here
// listen on ports of their own.
func installPgbouncer() error {
	if os.Geteuid() != 0 {
		return errors.New("not root, so not installing it")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("no apt-get")
	}
	install := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-q", "--no-install-recommends", "pgbouncer")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install pgbouncer: %w: %s", err, lastLines(out, 10))
		}
		return nil
	}
	if err := install(); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "apt-get", "update", "-q").CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %w: %s", err, lastLines(out, 10))
	}
	return install()
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
