package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

// ErrRefused marks a start-up failure that waiting cannot fix and that is
// the configuration's: a node on another chain, a node without the FINALITY
// tag, a PAYMENT_HOOK_SQL that does not prepare or that the group does not
// agree on. The binary exits 2 for it.
var ErrRefused = errors.New("refusing to start")

// Prep is what a writer needs ready before its first transaction.
type Prep struct {
	// ChainID and Contract are what the writer records; the hook recorded
	// for them must agree with HookSQL.
	ChainID   uint64
	Contracts []common.Address
	// Migrate applies the migrations; otherwise start-up waits for them.
	Migrate bool
	// HookSQL is PAYMENT_HOOK_SQL ("" for none).
	HookSQL string
	// ReplaceGroupHook makes HookSQL the contract's recorded hook instead
	// of refusing one that differs (ALLOW_HOOK_CHANGE).
	ReplaceGroupHook bool
	// IgnoreGroupHook skips the agreement (a backfill told so).
	IgnoreGroupHook bool
}

// Deps are the concrete parts a replica or a one-shot writer runs on; cmd/poller builds them.
type Deps struct {
	Pool  *pgxpool.Pool
	Store *payments.Store
	Nodes *chain.Endpoints
	Log   *slog.Logger
	// Sessions is the pool for what needs a session of its own
	// (migrations); nil means Pool. CheckSessions asks that it be probed
	// first (it is DATABASE_URL, which may go through a transaction
	// pooler), so that a pooler gives one clear refusal.
	Sessions      *pgxpool.Pool
	CheckSessions func(ctx context.Context, what string) error
	// Release names this binary's release in a contract step a start-up
	// migration runs (the release an older replica is told to roll to).
	Release string
}

// Prepare waits, with back-off, for the database, the schema (applying the
// migrations when asked), the payment hook (prepared, and agreed with the
// group) and the node (chain id, finality tag), and returns the prepared
// hook (nil for none). The node is asked while the database steps run (they
// share nothing, and behind a provider each is a round trip or more), so a
// node on the wrong chain is refused even while the database is still down.
// It fails at once only on what waiting cannot fix: a schema newer than this
// binary, a migration the database rejects, or an error wrapping
// ErrRefused; the first such failure of either side ends the other. beat is
// called on every attempt.
func Prepare(parent context.Context, p Prep, d Deps, beat func()) (*payments.Hook, error) {
	s := &startup{p: p, d: d, beat: beat}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	nodeDone := make(chan struct{})
	go func() {
		err := s.node(ctx)
		if err != nil {
			cancel(err)
		}
		close(nodeDone)
	}()
	hook, err := s.databaseSide(ctx, parent)
	if err != nil {
		cancel(err)
	}
	<-nodeDone
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(err, cause) && parent.Err() == nil {
		// The node refused first, and then a migration begun meanwhile
		// failed on its own: the refusal is returned, this is told.
		s.d.Log.Warn("the database side of start-up failed as well", slog.Any("err", err))
	}
	switch {
	case parent.Err() != nil:
		return nil, parent.Err()
	case ctx.Err() != nil:
		// The side that failed first names the failure; the other only
		// saw its context end.
		return nil, context.Cause(ctx)
	}
	// Last: a replica that would replace the recorded hook does so only
	// once it knows it can run (a wrong chain or a node without the
	// finality tag must not stop the others' crediting).
	if err := s.agreeOnHook(parent); err != nil {
		return nil, err
	}
	return hook, nil
}

// databaseSide is Prepare's part on the database: reachable, the schema,
// the hook prepared. ctx ends its waits; a migration it has begun runs
// under stop (Prepare's own context) instead, so that the node side's
// refusal does not cut it half-way: only a stop does.
func (s *startup) databaseSide(ctx, stop context.Context) (*payments.Hook, error) {
	if err := s.database(ctx); err != nil {
		return nil, err
	}
	if err := s.schema(ctx, stop); err != nil {
		return nil, err
	}
	return s.hook(ctx)
}

// Ready checks once, without waiting, what a one-shot command that reads
// the ledger and the chain needs (verify, cursor reset): a schema at this
// binary's version, and a node on the configured chain.
func Ready(ctx context.Context, d Deps) error {
	if err := migrations.Check(ctx, d.Pool); err != nil {
		return fmt.Errorf("checking the schema: %w", err)
	}
	if err := d.Nodes.Verify(ctx); err != nil {
		return fmt.Errorf("checking the node: %w", err)
	}
	return nil
}

// startup is one Prepare: each step waits for one thing.
type startup struct {
	p    Prep
	d    Deps
	beat func()
}

// retry runs op with the start-up back-off until it succeeds, fails
// permanently or ctx ends.
func (s *startup) retry(ctx context.Context, what string, op func() error) error {
	log := s.d.Log
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		s.beat()
		err := op()
		// A provider's Retry-After is honoured here too, up to a minute,
		// which keeps the liveness heartbeat well within its bound.
		if ra := min(chain.RetryAfterOf(err), time.Minute); ra > 0 {
			log.Warn(what+"; the provider asks to wait", slog.Any("err", err), slog.Duration("retry_after", ra))
			return struct{}{}, backoff.RetryAfter(int(math.Ceil(ra.Seconds())))
		}
		return struct{}{}, err
	}, backoff.WithBackOff(StartupBackoff()), backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, d time.Duration) {
			log.Warn(what+"; retrying", slog.Any("err", err), slog.Duration("retry_in", d))
		}))
	return err
}

// database waits until the database answers; refused TLS or credentials
// are permanent.
func (s *startup) database(ctx context.Context) error {
	return s.retry(ctx, "database unreachable", func() error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := s.d.Store.Ping(pctx)
		if database.TLSRefused(err) {
			// Waiting will not make the certificate trusted: the
			// connection string (sslmode, sslrootcert, host) is wrong.
			return backoff.Permanent(fmt.Errorf("%w: the database's TLS does not verify with DATABASE_URL's settings (sslmode, sslrootcert, host name): %w", ErrRefused, err))
		}
		if database.CredentialsRefused(err) {
			// Refused credentials, or no pg_hba.conf entry for this
			// client (e.g. one without TLS where only TLS is allowed).
			return backoff.Permanent(fmt.Errorf("%w: the database refused DATABASE_URL's credentials or connection settings: %w", ErrRefused, err))
		}
		return err
	})
}

// schema applies the migrations when asked (each attempt under stop, once
// begun), else waits for them.
func (s *startup) schema(ctx, stop context.Context) error {
	if !s.p.Migrate {
		return s.retry(ctx, "database schema not ready", func() error {
			err := migrations.Check(ctx, s.d.Pool)
			if errors.Is(err, migrations.ErrTooNew) {
				return backoff.Permanent(err)
			}
			return err
		})
	}
	sessions := cmp.Or(s.d.Sessions, s.d.Pool)
	return s.retry(ctx, "migrating failed", func() error {
		if s.d.CheckSessions != nil {
			err := s.d.CheckSessions(ctx, "MIGRATE=true (a migration's session)")
			if errors.Is(err, database.ErrNoSessions) {
				return backoff.Permanent(fmt.Errorf("%w: %w", ErrRefused, err))
			}
			if err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return backoff.Permanent(context.Cause(ctx))
		}
		// Contract steps are poller migrate's: one retires what has not
		// been looked at for long, and this role may not run one.
		res, err := Migrate(stop, sessions, migrations.Options{Release: s.d.Release, Contract: migrations.ContractNever})
		if err == nil && res.From != res.To {
			s.d.Log.Info("migrated the database", slog.Int("from", int(res.From)), slog.Int("to", int(res.To)))
		}
		if err == nil && res.Pending != nil {
			// Expanded: this binary runs; the contract step is poller
			// migrate's, once the replicas of older releases are gone.
			s.d.Log.Info("a contract step is pending; poller migrate runs it once no replica of an older release lives",
				slog.Int("step", int(res.Pending.Version)), slog.String("name", res.Pending.Name))
		}
		return permanentUnlessConnection(err)
	})
}

// hook prepares PAYMENT_HOOK_SQL (nil for none); one that does not prepare
// is permanent.
func (s *startup) hook(ctx context.Context) (*payments.Hook, error) {
	if s.p.HookSQL == "" {
		return nil, nil
	}
	var hook *payments.Hook
	err := s.retry(ctx, "preparing PAYMENT_HOOK_SQL", func() error {
		var err error
		hook, err = s.d.Store.PrepareHook(ctx, s.p.HookSQL)
		if errors.Is(err, payments.ErrBadHook) {
			return backoff.Permanent(fmt.Errorf("%w: %w", ErrRefused, err))
		}
		return err
	})
	return hook, err
}

// node waits until the node answers with the right chain id and serves
// the finality tag; either wrong is permanent.
func (s *startup) node(ctx context.Context) error {
	err := s.retry(ctx, "node unreachable", func() error {
		err := s.d.Nodes.Verify(ctx)
		if errors.Is(err, chain.ErrWrongChain) {
			return backoff.Permanent(fmt.Errorf("%w: %w", ErrRefused, err))
		}
		return err
	})
	if err != nil {
		return err
	}
	return s.retry(ctx, "checking the node's finality support", func() error {
		err := s.d.Nodes.ProbeFinality(ctx)
		if errors.Is(err, chain.ErrFinalityUnsupported) {
			return backoff.Permanent(fmt.Errorf("%w: %w", ErrRefused, err))
		}
		return err
	})
}

// agreeOnHook records the hook as the contracts' (or checks it agrees
// with the recorded one), unless told to ignore it.
func (s *startup) agreeOnHook(ctx context.Context) error {
	if s.p.IgnoreGroupHook {
		return nil
	}
	return s.retry(ctx, "recording the contracts' payment hook", func() error {
		for _, c := range s.p.Contracts {
			err := s.d.Store.AgreeOnHook(ctx, s.p.ChainID, strings.ToLower(c.Hex()), payments.HookDigest(s.p.HookSQL), s.p.ReplaceGroupHook)
			if errors.Is(err, payments.ErrHookMismatch) {
				return backoff.Permanent(fmt.Errorf("%w: %w; every writer of a contract must run the same hook (ALLOW_HOOK_CHANGE=true makes this one the recorded hook)", ErrRefused, err))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Migrate applies the embedded migrations on a connection of pool, as opts
// says, up to Latest.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts migrations.Options) (migrations.Result, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return migrations.Result{}, fmt.Errorf("acquiring a connection: %w", err)
	}
	defer conn.Release()
	return migrations.Apply(ctx, conn.Conn(), migrations.Latest(), opts)
}

// permanentUnlessConnection lets connection trouble be retried, and a lock
// the migration waited for too long (lock_timeout: a long reader held the
// table); it stops on anything else the server refused.
func permanentUnlessConnection(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return err
	}
	if errors.As(err, &pgErr) || errors.Is(err, migrations.ErrTooNew) {
		return backoff.Permanent(err)
	}
	return err
}

// StartupBackoff is the back-off between start-up attempts (and reconnects
// of long-lived readers): 250 ms doubling up to 15 s.
func StartupBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 250 * time.Millisecond
	b.Multiplier = 2
	b.MaxInterval = 15 * time.Second
	return b
}

// Writer returns the writer config of the group with the prepared hook.
func Writer(cfg poller.WriterConfig, hook *payments.Hook, hookSQL string) poller.WriterConfig {
	cfg.Hook, cfg.HookDigest = hook, payments.HookDigest(hookSQL)
	return cfg
}
