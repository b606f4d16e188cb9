package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/database"
)

// ErrPooler means the consumer's pool reaches Postgres through a
// transaction pooler (PgBouncer, RDS Proxy or Supavisor in transaction
// mode) and sends statements in a way that needs one server session from
// one transaction to the next: pgx's default, named prepared statements
// cached per connection (QueryExecModeCacheStatement), or
// QueryExecModeDescribeExec. Such a pooler hands each transaction whichever
// server connection is free, where those statements do not exist. The
// consumer stops at once instead of failing batch after batch.
var ErrPooler = errors.New("the pool goes through a transaction pooler, which cannot hold its prepared statements")

// poolerFix is what to do about ErrPooler.
const poolerFix = "add default_query_exec_mode=cache_describe to the connection string " +
	"(or set pgxpool.Config.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe), " +
	"or use PgBouncer 1.21 or later with max_prepared_statements set; see docs/consuming.md"

// sessionModes are the exec modes that need a server session across
// transactions (a named statement, or an unnamed one across round trips).
var sessionModes = map[pgx.QueryExecMode]string{
	pgx.QueryExecModeCacheStatement: "cache_statement (pgx's default)",
	pgx.QueryExecModeDescribeExec:   "describe_exec",
}

// checkPool tells whether pool goes through a transaction pooler when that
// matters: it refuses, with ErrPooler, a pool whose exec mode such a
// pooler cannot carry, and says whether the consumer may LISTEN on pool
// (listen false: poll only, as LISTEN through such a pooler never hears a
// notification). It asks the server only when one of the two depends on
// it, with two connections of its own (database.KeepsSessions).
func checkPool(ctx context.Context, pool *pgxpool.Pool, cfg config) (listen bool, err error) {
	listen = !cfg.noListen && cfg.listen == nil
	cc := pool.Config().ConnConfig
	mode, needsSessions := sessionModes[cc.DefaultQueryExecMode]
	if !needsSessions && !listen {
		return false, nil
	}
	keeps, err := database.KeepsSessions(ctx, cc)
	if err != nil {
		return false, fmt.Errorf("asking whether the pool keeps its sessions: %w", err)
	}
	switch {
	case keeps:
		return listen, nil
	case needsSessions:
		return false, fmt.Errorf("%w: its connections send statements as %s, and each transaction may get another server connection; %s",
			ErrPooler, mode, poolerFix)
	}
	cfg.log.Warn("the consumer's pool goes through a transaction pooler, where LISTEN hears nothing: polling every PollInterval; give ListenOn a pool that reaches Postgres itself for a wake-up at each commit",
		slog.Duration("poll_interval", cfg.poll))
	return false, nil
}
