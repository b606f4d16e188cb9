// Package pgtest gives each test its own database on a real Postgres: the
// server named by DATABASE_URL, else 127.0.0.1:5432, else — where the
// Postgres binaries are installed — a throwaway cluster it starts itself.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// DefaultURL is tried when DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	once    sync.Once
	server  *url.URL
	cluster *Cluster
	findErr error
)

// Main runs the tests, drops the binary's template database, then runs
// each check (a leak check, say) if the tests passed, and removes a
// throwaway cluster if one was started. Call it from TestMain.
func Main(m *testing.M, checks ...func() error) {
	code := m.Run()
	if err := dropTemplate(); err != nil {
		fmt.Fprintln(os.Stderr, "after the tests:", err)
		code = 1
	}
	for _, check := range checks {
		if code != 0 {
			break
		}
		if err := check(); err != nil {
			fmt.Fprintln(os.Stderr, "after the tests:", err)
			code = 1
		}
	}
	if cluster != nil {
		cluster.Remove()
	}
	os.Exit(code)
}

// CI reports whether the tests run in CI (CI=true, or any other true value
// strconv.ParseBool accepts). There a test must not pass by skipping what it
// needs: it fails instead.
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// ServerURL returns the URL of the server tests use, starting a throwaway
// cluster if needed. The database part of the URL is "postgres".
func ServerURL(t testing.TB) *url.URL {
	t.Helper()
	once.Do(func() { server, findErr = find() })
	if findErr != nil {
		t.Fatal(findErr)
	}
	u := *server
	return &u
}

func find() (*url.URL, error) {
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("pgtest: DATABASE_URL must be a postgres:// URL")
	}
	if answers(u) {
		return u, nil
	}
	if os.Getenv("DATABASE_URL") != "" {
		return nil, fmt.Errorf("pgtest: no Postgres answers at DATABASE_URL (%s); start it or unset DATABASE_URL", u.Redacted())
	}
	c, err := StartCluster()
	if err != nil {
		return nil, fmt.Errorf("pgtest: no Postgres at 127.0.0.1:5432 and no throwaway cluster (%w); start one with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", err)
	}
	cluster = c
	return c.URL(), nil
}

func answers(u *url.URL) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx) == nil
}

// NewDatabase creates an empty database for t, dropped when t ends, and
// returns its URL. Tests that migrate it themselves use it.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, ServerURL(t), "")
}

// NewPool creates a database for t at the schema of the embedded migrations
// (migrations.Latest), dropped when t ends, and returns a pool on it, closed
// when t ends, and its URL.
//
// The migrations run once per test binary, into a template database built
// from this binary's embedded migrations; each test's database is a copy of
// it, so no test pays for migrating.
func NewPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	admin := ServerURL(t)
	dbURL := newDatabase(t, admin, templateFor(t, admin))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, dbURL
}

// newDatabase creates a database for t, a copy of template ("" for
// Postgres's default, an empty database), dropped when t ends, and returns
// its URL.
func newDatabase(t testing.TB, admin *url.URL, template string) string {
	t.Helper()
	name := "burnpoller_test_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", admin.Redacted(), err)
	}
	defer conn.Close(ctx)
	create := "CREATE DATABASE " + name
	if template != "" {
		create += " TEMPLATE " + template
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		t.Fatalf("pgtest: creating database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: dropping %s: %v", name, err)
		}
	})
	u := *admin
	u.Path = "/" + name
	return u.String()
}

// Cluster is a throwaway Postgres cluster in a temporary directory.
type Cluster struct {
	dir    string
	port   int
	pgCtl  string
	asUser string // run pg_ctl as this user ("" for the current one)
}

// NewCluster starts a throwaway cluster for t (see StartCluster), removed
// when t ends. Where none can be started it skips t, except in CI (see CI):
// there t fails with the reason, so that a test needing a cluster cannot
// pass unnoticed by not running.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return clusterOrStop(t, StartCluster)
}

// clusterOrStop returns the cluster start gives, removed when t ends, or
// stops t: it fails in CI and skips elsewhere.
func clusterOrStop(t testing.TB, start func() (*Cluster, error)) *Cluster {
	t.Helper()
	c, err := start()
	if err != nil {
		if CI() {
			t.Fatalf("pgtest: no throwaway Postgres cluster, and CI=true forbids skipping: %v", err)
		}
		t.Skip("pgtest: no throwaway Postgres cluster possible:", err)
	}
	t.Cleanup(c.Remove)
	return c
}

// StartCluster initialises and starts a throwaway cluster on a free port.
// Postgres refuses to run as root, so as root it runs as user postgres.
// The caller removes it (Remove); NewCluster does that for a test.
func StartCluster() (_ *Cluster, err error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if os.Geteuid() == 0 {
		c.asUser = "postgres"
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// URL is the cluster's admin URL.
func (c *Cluster) URL() *url.URL {
	u, _ := url.Parse(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port))
	return u
}

// Port is the cluster's TCP port.
func (c *Cluster) Port() int { return c.port }

// Start starts (or restarts after Stop) the server and waits until it answers.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", c.port, c.dir)
	cmd := c.command(c.pgCtl, "-D", c.dataDir(), "-l", filepath.Join(c.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		return fmt.Errorf("pg_ctl start: %w: %s\n%s", err, out, log)
	}
	return nil
}

// Stop stops the server immediately (in-flight transactions are aborted).
func (c *Cluster) Stop() {
	_ = c.command(c.pgCtl, "-D", c.dataDir(), "-m", "immediate", "-w", "stop").Run()
}

// Remove stops the server and deletes its files.
func (c *Cluster) Remove() {
	c.Stop()
	_ = os.RemoveAll(c.dir)
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	if c.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", c.asUser, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(matches) == 0 {
		return "", errors.New("no pg_ctl on PATH or in /usr/lib/postgresql/*/bin")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

func freePort() (int, error) {
	addr, err := FreeAddr()
	if err != nil {
		return 0, err
	}
	return addr.Port, nil
}

// FreeAddr finds a free TCP port on 127.0.0.1 for a server that a test
// starts later (a child process, a restarted cluster): harness.FreeAddr, so
// that this package and the process harness never hand out the same port.
func FreeAddr() (*net.TCPAddr, error) { return harness.FreeAddr() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ClearPGEnv clears the variables pgx reads besides the connection string and
// points the home directory at an empty one (no .pgpass, no client
// certificates), so a connection string resolves the same everywhere; then
// it sets env.
func ClearPGEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range []string{"PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGAPPNAME",
		"PGCONNECT_TIMEOUT", "PGSSLMODE", "PGSSLKEY", "PGSSLCERT", "PGSSLCERTMODE", "PGSSLSNI", "PGSSLROOTCERT",
		"PGSSLPASSWORD", "PGSSLNEGOTIATION", "PGTARGETSESSIONATTRS", "PGSERVICE", "PGSERVICEFILE", "PGTZ", "PGOPTIONS",
		"PGMINPROTOCOLVERSION", "PGMAXPROTOCOLVERSION", "PGCHANNELBINDING", "PGREQUIREAUTH"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PGUSER", "envuser")
	for k, v := range env {
		t.Setenv(k, v)
	}
}
