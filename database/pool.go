// Package database is burnpoller's policy for Postgres connections: the
// pools every process opens (the ledger's, the session pool for migrations
// and LISTEN), how statements are sent, what happens when a server turns
// read-only, how a transaction pooler is recognised, and how a connection
// string is shown without its secrets. It imports nothing else of ours.
package database

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ExecModes are the values of DATABASE_EXEC_MODE, in the order shown.
var ExecModes = []string{"cache_describe", "cache_statement", "describe_exec", "exec", "simple_protocol"}

var execModes = map[string]pgx.QueryExecMode{
	"cache_describe":  pgx.QueryExecModeCacheDescribe,
	"cache_statement": pgx.QueryExecModeCacheStatement,
	"describe_exec":   pgx.QueryExecModeDescribeExec,
	"exec":            pgx.QueryExecModeExec,
	"simple_protocol": pgx.QueryExecModeSimpleProtocol,
}

// ValidExecMode says whether mode is one of ExecModes.
func ValidExecMode(mode string) bool {
	_, ok := execModes[mode]
	return ok
}

// Options are where a process's pools connect, and how.
type Options struct {
	// URL is DATABASE_URL; DirectURL, when set, DATABASE_DIRECT_URL (a
	// string that reaches Postgres itself, not a transaction pooler).
	URL, DirectURL string
	// ExecMode is one of ExecModes; a connection string that names its own
	// default_query_exec_mode wins.
	ExecMode string
	// MaxConns caps the ledger's pools.
	MaxConns int32
}

// Open opens a pool on the URL whose sessions are named app (in
// pg_stat_activity) unless the URL names them; readOnly makes every
// session read-only, asked for with a startup parameter: through a pooler
// that refuses it (PgBouncer: "unsupported startup parameter") the pool
// reads without it (setting it per session instead would leak to other
// clients of a transaction pooler; the commands that ask only read).
// Nothing connects until the pool is used, but for that probe.
func Open(ctx context.Context, o Options, readOnly bool, app string) (*pgxpool.Pool, error) {
	pc, ref, err := poolConfig(o.URL, "DATABASE_URL", o.ExecMode, readOnly, app)
	if err != nil {
		return nil, err
	}
	// By default one connection works, one serves probes, the rest absorb
	// a slow release.
	pc.MaxConns = o.MaxConns
	pool, err := ref.open(ctx, pc)
	if err != nil || !readOnly {
		return pool, err
	}
	if err := pool.Ping(ctx); err != nil && strings.Contains(err.Error(), "unsupported startup parameter") {
		pool.Close()
		delete(pc.ConnConfig.RuntimeParams, "default_transaction_read_only")
		return ref.open(ctx, pc)
	}
	return pool, nil
}

// Sessions is the pool for what needs a session of its own: migrations
// (tern's session lock) and LISTEN.
type Sessions struct {
	*pgxpool.Pool
	// Direct says it is DirectURL's, which reaches Postgres itself.
	Direct bool
}

// OpenSessions opens the session pool, on DirectURL when set, else URL.
// Nothing connects until it is used.
func OpenSessions(ctx context.Context, o Options, app string) (Sessions, error) {
	dsn, key := o.URL, "DATABASE_URL"
	if o.DirectURL != "" {
		dsn, key = o.DirectURL, "DATABASE_DIRECT_URL"
	}
	pc, ref, err := poolConfig(dsn, key, o.ExecMode, false, app)
	if err != nil {
		return Sessions{}, err
	}
	pc.MaxConns = 2
	// Used at start (migrations) and by one held LISTEN session: an idle
	// connection is not kept (on a server that may since have been
	// demoted, say).
	pc.MaxConnIdleTime = time.Minute
	pool, err := ref.open(ctx, pc)
	return Sessions{Pool: pool, Direct: o.DirectURL != ""}, err
}

// noSessionsHint is what to do when DATABASE_URL goes through a
// transaction pooler and something needs a session.
const noSessionsHint = "set DATABASE_DIRECT_URL to a connection string that reaches Postgres itself (not the pooler)"

// Check returns an error wrapping ErrNoSessions when the pool (made from
// DATABASE_URL, not direct) does not keep sessions; what names the need.
func (s Sessions) Check(ctx context.Context, what string) error {
	if s.Direct {
		return nil
	}
	ok, err := KeepsSessions(ctx, s.Config().ConnConfig)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("DATABASE_URL: %w: %s needs a session; %s", ErrNoSessions, what, noSessionsHint)
	}
	return nil
}

// poolConfig parses dsn (the variable key) with the settings every pool
// shares: the exec mode, timeouts, the session name, and dropping a
// connection to a server that turned read-only.
func poolConfig(dsn, key, execMode string, readOnly bool, app string) (*pgxpool.Config, *poolRef, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a valid connection string%s", key, ParseProblem(err))
	}
	pc.MinConns = 0
	pc.HealthCheckPeriod = 15 * time.Second
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = app
	}
	if readOnly {
		pc.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	// A connection string may name its own mode
	// (default_query_exec_mode=...); the option applies otherwise.
	if mode, ok := execModes[execMode]; ok && !strings.Contains(dsn, "default_query_exec_mode") {
		pc.ConnConfig.DefaultQueryExecMode = mode
	}
	// A server that refuses writes because it is (now) a standby, after a
	// failover, keeps refusing: the connection that met it is dropped, and
	// so is every other one of the pool (they reach the same server), so
	// that the next goes where target_session_attrs=read-write finds the
	// primary.
	pool := &poolRef{}
	pc.ConnConfig.OnPgError = func(_ *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == "25006" {
			pool.reset()
			return false
		}
		return !strings.EqualFold(e.Severity, "FATAL")
	}
	return pc, pool, nil
}

// poolRef lets a connection's error handler reach its pool, which exists
// only once open has made it from the config.
type poolRef struct{ p atomic.Pointer[pgxpool.Pool] }

// open makes the pool of pc, the config poolConfig returned with r.
func (r *poolRef) open(ctx context.Context, pc *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err == nil {
		r.p.Store(pool)
	}
	return pool, err
}

// reset drops the pool's idle connections, and the others as they are
// released; not from the handler's goroutine, which holds a connection.
func (r *poolRef) reset() {
	if p := r.p.Load(); p != nil {
		go p.Reset()
	}
}

// TLSRefused says a connection failed on TLS: a certificate that does not
// verify (unknown authority, another host name, expired), or a server that
// refuses TLS where the connection string requires it. Waiting does not
// fix it.
func TLSRefused(err error) bool {
	if err == nil {
		return false
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify) ||
		strings.Contains(err.Error(), "server refused TLS connection")
}

// CredentialsRefused says the server refused the connection string's
// credentials, or has no pg_hba.conf entry for this client (one without
// TLS where only TLS is allowed, say). Waiting does not fix it.
func CredentialsRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && slices.Contains([]string{"28000", "28P01"}, pgErr.Code)
}
