package pgtopo

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// standbyName is the standby's application_name in primary_conninfo, which
// synchronous_standby_names names, and the name of its replication slot.
const standbyName = "standby1"

// Pair is a primary with one streaming standby, both running. The standby
// was made by pg_basebackup -R from the primary and streams from it through
// a physical replication slot, so the primary keeps the WAL the standby has
// not received yet.
type Pair struct{ Primary, Standby *Server }

// NewPair starts a primary (as Standalone) and a standby of it, stopped and
// deleted when t ends, and returns once the standby streams.
//
// With sync true, replication is synchronous: the primary's
// synchronous_standby_names names the standby and synchronous_commit is on,
// so a commit on the primary returns only once the standby has flushed it;
// NewPair returns once pg_stat_replication shows the standby's sync_state as
// sync. The setting lives only in the primary's postgresql.auto.conf (it is
// set after the base backup), so a standby promoted by Failover does not
// wait for a standby of its own. With sync false, replication is
// asynchronous.
func NewPair(t testing.TB, sync bool) *Pair {
	t.Helper()
	primary := Standalone(t)
	standby := &Server{bin: primary.bin, os: primary.os, sslmode: "disable"}
	standby.dir = standby.os.tempDir(t, "pgtopo-standby-")
	t.Cleanup(func() {
		standby.Kill()
		_ = os.RemoveAll(standby.dir)
	})
	out, err := standby.command(standby.binary("pg_basebackup"),
		"-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.port, standbyName),
		"-D", standby.dataDir(), "-R", "-X", "stream", "-C", "-S", standbyName, "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		t.Fatalf("pgtopo: pg_basebackup: %v: %s\n%s", err, out, primary.Log())
	}
	// -R wrote primary_conninfo; this later line overrides it, so that
	// application_name is certainly there for synchronous_standby_names.
	conninfo := fmt.Sprintf("\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\nprimary_slot_name = '%s'\n",
		primary.port, standbyName, standbyName)
	if err := appendFile(filepath.Join(standby.dataDir(), "postgresql.auto.conf"), conninfo); err != nil {
		t.Fatal(err)
	}
	standby.port = freePort(t)
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Pair{Primary: primary, Standby: standby}
	want := "async"
	if sync {
		want = "sync"
		// One statement each: ALTER SYSTEM refuses the implicit
		// transaction of a multi-statement query.
		primary.Exec(t, "postgres", fmt.Sprintf("ALTER SYSTEM SET synchronous_standby_names = '%s'", standbyName))
		primary.Exec(t, "postgres", "ALTER SYSTEM SET synchronous_commit = on")
		primary.Exec(t, "postgres", "SELECT pg_reload_conf()")
	}
	poll(t, 30*time.Second, "standby streaming ("+want+")", func(ctx context.Context) (bool, error) {
		var n int
		err := primary.queryRow(ctx, "postgres", fmt.Sprintf(
			"SELECT count(*) FROM pg_stat_replication WHERE application_name = '%s' AND state = 'streaming' AND sync_state = '%s'",
			standbyName, want), &n)
		return n == 1, err
	}, primary, standby)
	return p
}

// MultiHostURL is a URL naming both servers, primary first, with
// target_session_attrs=read-write, so that a client connects to whichever
// accepts writes:
// postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/db?sslmode=disable&target_session_attrs=read-write
func (p *Pair) MultiHostURL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		p.Primary.port, p.Standby.port, url.PathEscape(db))
}

// Failover kills the primary (pg_ctl stop -m immediate, like a crash) and
// promotes the standby, and returns once the standby accepts writes
// (pg_is_in_recovery() is false). The fields keep their names: Primary is
// the killed server, Standby the new primary.
func (p *Pair) Failover(t testing.TB) {
	t.Helper()
	p.Primary.Kill()
	if err := p.Standby.Promote(); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "promoted standby out of recovery", func(ctx context.Context) (bool, error) {
		var inRecovery bool
		err := p.Standby.queryRow(ctx, "postgres", "SELECT pg_is_in_recovery()", &inRecovery)
		return !inRecovery, err
	}, p.Standby)
}

// WaitReplayed waits until the standby has replayed everything the primary
// has written so far (the primary's pg_current_wal_lsn() is at or before
// the standby's pg_last_wal_replay_lsn()), for tests that need the standby
// at a consistent point. It fails t after 30 seconds.
func (p *Pair) WaitReplayed(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lsn string
	if err := p.Primary.queryRow(ctx, "postgres", "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		t.Fatalf("pgtopo: the primary's WAL position: %v", err)
	}
	poll(t, 30*time.Second, "standby replayed "+lsn, func(ctx context.Context) (bool, error) {
		var done bool
		err := p.Standby.queryRow(ctx, "postgres",
			fmt.Sprintf("SELECT coalesce(pg_last_wal_replay_lsn() >= '%s'::pg_lsn, false)", lsn), &done)
		return done, err
	}, p.Primary, p.Standby)
}

// CreateDatabase creates database db on the primary (it reaches the
// standby by replication) and waits until the standby has it.
func (p *Pair) CreateDatabase(t testing.TB, db string) {
	t.Helper()
	p.Primary.Exec(t, "postgres", "CREATE DATABASE "+quoteIdent(db))
	p.WaitReplayed(t)
	poll(t, 30*time.Second, "database "+db+" on the standby", func(ctx context.Context) (bool, error) {
		var one int
		err := p.Standby.queryRow(ctx, db, "SELECT 1", &one)
		return err == nil, err
	}, p.Standby)
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
