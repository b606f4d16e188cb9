package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/service"
)

// contractWaitLog is how often `poller migrate --contract` says what it is
// waiting for.
const contractWaitLog = 10 * time.Second

// contractQuiet is how long poller migrate sees nothing of an older
// release before it runs a contract step (migrations.Options.Quiet).
const contractQuiet = 30 * time.Second

// cmdMigrate runs "poller migrate [--contract [--force]] [--status]".
func cmdMigrate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	contract := fs.Bool("contract", false, "wait until no replica of an older release lives, then run the contract steps")
	force := fs.Bool("force", false, "with --contract: run the contract steps now, refusing the older replicas' writes from then on")
	status := fs.Bool("status", false, "print the schema version, the contract steps pending and what holds them; change nothing")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fmt.Fprintf(stderr, "poller migrate: unexpected arguments %q\n", fs.Args())
		}
		return exitUsage
	}
	if *force && !*contract {
		fmt.Fprintln(stderr, "poller migrate: --force goes with --contract")
		return exitUsage
	}
	if *status && (*contract || *force) {
		fmt.Fprintln(stderr, "poller migrate: --status changes nothing; it goes alone")
		return exitUsage
	}
	return dbCommand(stderr, nil, func(ctx context.Context, c *command, pool *pgxpool.Pool) int {
		if *status {
			return migrateStatus(ctx, c.log, pool, stdout)
		}
		opts := migrations.Options{Release: release(), Quiet: contractQuiet, Applied: func(v int32, name string, took time.Duration) {
			c.log.Info("applied a migration", slog.Int("version", int(v)), slog.String("name", name), slog.Duration("took", took))
		}}
		switch {
		case *force:
			opts.Contract = migrations.ContractForce
		case *contract:
			opts.Contract = migrations.ContractWait
			var last time.Time
			opts.Waiting = func(p *migrations.Pending) {
				if time.Since(last) >= contractWaitLog {
					last = time.Now()
					c.log.Info("waiting for the replicas of older releases to go before the contract step",
						slog.Int("step", int(p.Version)), slog.String("name", p.Name), slog.Any("older", p.Older))
				}
			}
		}
		return migrate(ctx, c, opts, stdout)
	})
}

// migrate applies the migrations on a session of their own.
func migrate(ctx context.Context, c *command, opts migrations.Options, stdout io.Writer) int {
	log := c.log
	// A migration outside a transaction runs statement by statement on one
	// session: DATABASE_DIRECT_URL when DATABASE_URL goes through a
	// transaction pooler.
	sessions, err := database.OpenSessions(ctx, c.cfg.Database(), migrations.SessionName("burnpoller"))
	if err != nil {
		log.Error("connecting to the database", slog.Any("err", err))
		return exitUsage
	}
	defer sessions.Close()
	if err := sessions.Check(ctx, "poller migrate (a migration's session)"); err != nil {
		log.Error("migrating", slog.Any("err", err))
		if errors.Is(err, database.ErrNoSessions) {
			return exitUsage
		}
		return exitFailure
	}
	res, err := service.Migrate(ctx, sessions.Pool, opts)
	if err != nil {
		log.Error("migrating", slog.Any("err", err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "schema at version %d (was %d)\n", res.To, res.From)
	if res.Pending != nil {
		fmt.Fprintf(stdout, "%s\nit runs with the first `poller migrate` once they are gone; `poller migrate --contract` waits for that, `--contract --force` does not (their writes are refused from then on)\n", res.Pending)
	}
	return exitOK
}

// migrateStatus prints the schema version, what this binary brings, and
// each contract step not applied yet with what of older releases lives.
func migrateStatus(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, stdout io.Writer) int {
	st, err := migrations.ReadStatus(ctx, pool)
	if err != nil {
		log.Error("reading the schema's state", slog.Any("err", err))
		return exitFailure
	}
	fmt.Fprintf(stdout, "schema at version %d; this binary brings %d and runs against %d or later\n",
		st.Version, migrations.Latest(), migrations.Compatible())
	for _, p := range st.Pending {
		if len(p.Older) == 0 {
			fmt.Fprintf(stdout, "contract step %d (%s) pending: no replica of an older release lives; `poller migrate` runs it\n", p.Version, p.Name)
			continue
		}
		fmt.Fprintf(stdout, "%s\n", &p)
	}
	for _, a := range st.Applied {
		forced := ""
		if a.Forced {
			forced = ", forced while " + strings.Join(a.Older, ", ") + " lived"
		}
		fmt.Fprintf(stdout, "contract step %d (%s) applied %s by burnpoller %s%s\n",
			a.Version, a.Name, a.At.UTC().Format(time.RFC3339), a.Release, forced)
	}
	return exitOK
}
