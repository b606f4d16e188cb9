// Command poller records every LogBurnWithDigest burn of one contract as
// exactly one payment row in Postgres. Run it as several replicas: they
// share a cursor row whose lock lets one work while the others stand by.
//
//	poller [run]                 poll until SIGTERM/SIGINT (the default)
//	poller backfill              record a block range, resumably
//	poller verify                compare the chain with the ledger
//	poller events                print payment lifecycle events by seq (tail: follow them)
//	poller webhooks status       webhook backlog and dead letters
//	poller migrate               apply database migrations and exit (--contract: wait to run a contract step)
//	poller cursor show           print the cursor
//	poller cursor reset --to N   move the cursor (clears a finality violation)
//	poller config                print every variable with its default, value and meaning
//	poller config --markdown     print docs/configuration.md
//	poller version               print the build
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `usage: poller [run|backfill|verify|cursor|events|tail|webhooks|migrate|config|version]

  run [--until-finalized]    poll the chain and record payments until SIGTERM or SIGINT (default);
                             with --until-finalized, exit 0 once caught up with the target
  backfill --from N --to M   record every burn of blocks N..M (M may be "finalized") in chunks, each
             [--restart] [--chunk K]   its own transaction; resumable; one JSON summary on stdout
             [--allow-hook-mismatch] [--group NAME]
  verify --from N --to M     compare the chain's burns with the payments table; exit 0 clean, 1 on
             [--json] [--group NAME]   discrepancies, 3 when it could not complete; never writes
  events [--since SEQ]       print payment events (seen, retracted, confirmed) in seq order, after SEQ
         [--follow] [--json] (default: all); --follow keeps printing them as they commit
  tail [--since SEQ] [--json]  events --follow, from the events committed after it starts
  webhooks status [--json]   per endpoint: backlog, oldest undelivered, retrying, dead letters, last error
         [--group NAME]      (of one group's events)
  webhooks retry --dead      re-arm every dead-lettered delivery
  webhooks retry --seq N     send event N again to every endpoint subscribed to its kind
  migrate [--contract]       apply the migrations and exit; a contract step (one that retires older
          [--force] [--status]  releases) runs only once none of their replicas lives, else is left
                             pending; --contract waits for them to go, --force does not; --status
                             prints the schema, the pending steps and what holds them, and changes
                             nothing
  cursor show [--json]       print the cursor (with GROUPS, every group's)
         [--group NAME]
  cursor reset --to N        set the cursor to block N (after 'poller verify'; clears a finality violation)
             [--wait] [--allow-skip] [--reason TEXT] [--group NAME]
  config                     print every environment variable with default, value and meaning
  config --markdown          print docs/configuration.md, the reference of every variable
  version                    print the version and the revision it was built from

With GROUPS, --group NAME picks the group a command acts on (required for backfill, verify and
cursor reset when GROUPS names several).
Configuration comes from the environment; see 'poller config'.
`

// defaultMemoryLimit is the Go runtime's soft memory limit when GOMEMLIMIT
// is not set: with ranges bounded to about 2000 logs, the heap stays small,
// and the limit keeps the garbage collector from letting it double before
// collecting. See BENCHMARKS.md for the resident memory it gives.
const defaultMemoryLimit = 32 << 20

// defaultGCPercent is the garbage collector's GOGC under the default
// memory limit when GOGC is not set either: the limit bounds the heap, so
// the collector may let it grow to four times what is live below it, and
// runs less often during catch-up (BENCHMARKS.md: 10–34 % less CPU
// for the poller, the same peak RSS within the limit's reach). Under a
// GOMEMLIMIT of the operator's, GOGC keeps Go's default.
const defaultGCPercent = 300

func main() {
	runtimeDefaults(os.Getenv)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// runtimeDefaults sets the memory limit and GOGC the environment
// (getenv) leaves to the binary.
func runtimeDefaults(getenv func(string) string) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(defaultMemoryLimit)
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	// These take flags; the rest take no arguments.
	switch cmd {
	case "run":
		return cmdRun(args, stderr)
	case "backfill":
		return cmdBackfill(args, stdout, stderr)
	case "verify":
		return cmdVerify(args, stdout, stderr)
	case "cursor":
		return cmdCursor(args, stdout, stderr)
	case "events", "tail":
		return cmdEvents(cmd, args, stdout, stderr)
	case "webhooks":
		return cmdWebhooks(args, stdout, stderr)
	case "migrate":
		return cmdMigrate(args, stdout, stderr)
	case "config":
		return cmdConfigArgs(args, stdout, stderr)
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "poller %s: unexpected arguments %q\n%s", cmd, args, usage)
		return exitUsage
	}
	switch cmd {
	case "version":
		printVersion(stdout)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "poller: unknown command %q\n%s", cmd, usage)
	return exitUsage
}

func reportProblems(stderr io.Writer, problems []string) int {
	for _, p := range problems {
		fmt.Fprintln(stderr, "poller: config:", p)
	}
	if len(problems) > 0 {
		return exitUsage
	}
	return exitOK
}

// dbCommand runs f, a one-shot command that needs only the database, with
// its configuration (of the group --group names, if group is set), a
// logger, signal handling and a pool.
func dbCommand(stderr io.Writer, group *groupArg, f func(ctx context.Context, c *command, pool *pgxpool.Pool) int) int {
	c, code := newCommand(stderr, config.ScopeMigrate, nil, group)
	if c == nil {
		return code
	}
	defer c.stop()
	pool, err := database.Open(c.ctx, c.cfg.Database(), false, migrations.SessionName("burnpoller"))
	if err != nil {
		c.log.Error("connecting to the database", slog.Any("err", err))
		return exitFailure
	}
	defer pool.Close()
	return f(c.ctx, c, pool)
}
