package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
)

// cmdCursor runs "poller cursor show|reset".
func cmdCursor(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "poller cursor: want show or reset\n%s", usage)
		return exitUsage
	}
	switch args[0] {
	case "show":
		return cmdCursorShow(args[1:], stdout, stderr)
	case "reset":
		return cmdCursorReset(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "poller cursor: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

func cmdCursorShow(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller cursor show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fmt.Fprintf(stderr, "poller cursor show: unexpected arguments %q\n", fs.Args())
		}
		return exitUsage
	}
	return dbCommand(stderr, scopeMigrate, func(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool) int {
		return showCursors(ctx, cfg, log, pool, *asJSON, stdout)
	})
}

func showCursors(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool, asJSON bool, stdout io.Writer) int {
	cursors, err := payments.NewStore(pool).Cursors(ctx)
	if err != nil {
		log.Error("reading cursors", slog.Any("err", err))
		return exitFailure
	}
	// With the group configured, show its cursor alone.
	if id := cursorIDIfConfigured(cfg); id != "" {
		var mine []payments.Cursor
		for _, c := range cursors {
			if c.ID == id {
				mine = append(mine, c)
			}
		}
		if len(mine) == 0 {
			log.Error("no such cursor", slog.String("cursor_id", id))
			return exitFailure
		}
		cursors = mine
	}
	if asJSON {
		type out struct {
			ID        string    `json:"id"`
			Block     int64     `json:"last_processed_block"`
			Hash      string    `json:"last_processed_hash"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		list := make([]out, len(cursors))
		for i, c := range cursors {
			list[i] = out{c.ID, c.Block, c.Hash, c.UpdatedAt}
		}
		if err := json.NewEncoder(stdout).Encode(list); err != nil {
			return exitFailure
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURSOR\tBLOCK\tHASH\tUPDATED")
	for _, c := range cursors {
		hash := c.Hash
		if hash == "" {
			hash = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.ID, c.Block, hash, c.UpdatedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
	return exitOK
}

// cursorIDIfConfigured is the configured group's cursor id, or "" when
// neither CURSOR_ID nor CHAIN_ID and BURN_CONTRACT are set.
func cursorIDIfConfigured(cfg Config) string {
	if cfg.CursorID != "" {
		return cfg.CursorID
	}
	if cfg.ChainID != 0 && cfg.BurnContract != "" {
		return cfg.cursorID()
	}
	return ""
}

func cmdCursorReset(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller cursor reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.Int64("to", -2, "block N: every burn up to N is considered recorded; the poller resumes at N+1 (-1 starts from genesis)")
	wait := fs.Bool("wait", false, "wait for the replica holding the cursor lock instead of refusing")
	allowSkip := fs.Bool("allow-skip", false, "allow moving the cursor forward, which skips the burns in between")
	reason := fs.String("reason", "", "why, for the log")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if *to < -1 {
		problems = append(problems, "--to N is required (N >= -1)")
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "poller cursor reset:", p)
		}
		return exitUsage
	}
	return dbCommand(stderr, scopeRun, func(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool) int {
		err := resetCursor(ctx, cfg, log, pool, *to, *wait, *allowSkip, *reason, stdout)
		if err != nil {
			log.Error("cursor reset failed", slog.Any("err", err))
			if errors.Is(err, payments.ErrLockTimeout) || errors.Is(err, errSkipRefused) {
				return exitUsage
			}
			return exitFailure
		}
		return exitOK
	})
}

var errSkipRefused = errors.New("moving the cursor forward skips burns; pass --allow-skip if that is really meant")

func resetCursor(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool, to int64, wait, allowSkip bool, reason string, stdout io.Writer) error {
	id := cfg.cursorID()
	if err := migrations.Check(ctx, pool); err != nil {
		return err
	}

	// The hash of block N, so that the next range's continuity check holds.
	hash := ""
	if to >= 0 {
		nodes, err := dialEndpoints(ctx, cfg, nil, log)
		if err != nil {
			return err
		}
		defer nodes.Close()
		if err := nodes.Verify(ctx); err != nil {
			return err
		}
		h, err := nodes.Header(ctx, uint64(to))
		if err != nil {
			return fmt.Errorf("reading block %d from the node: %w", to, err)
		}
		hash = strings.ToLower(h.Hash.Hex())
	}

	limits := payments.Limits{LockWait: 2 * time.Second, TxTimeout: time.Minute}
	if wait {
		limits = payments.Limits{LockWait: 24 * time.Hour, TxTimeout: 25 * time.Hour}
	}
	store := payments.NewStore(pool)
	tx, err := store.Begin(ctx, limits)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	cur, err := tx.LockCursor(ctx, id)
	if errors.Is(err, payments.ErrLockTimeout) {
		return fmt.Errorf("cursor %q is locked by a running replica; retry, or pass --wait: %w", id, err)
	}
	if err != nil {
		return err
	}
	if to > cur.Block && !allowSkip {
		return fmt.Errorf("cursor %q is at %d, --to %d: %w", id, cur.Block, to, errSkipRefused)
	}
	dbUser, err := tx.DatabaseUser(ctx)
	if err != nil {
		return err
	}
	if err := tx.SetCursor(ctx, id, to, hash); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	osUser := "unknown"
	if u, err := user.Current(); err == nil {
		osUser = u.Username
	}
	host, _ := os.Hostname()
	log.Warn("cursor reset", slog.String("cursor_id", id),
		slog.Int64("from_block", cur.Block), slog.String("from_hash", cur.Hash),
		slog.Int64("to_block", to), slog.String("to_hash", hash),
		slog.String("os_user", osUser), slog.String("host", host), slog.String("db_user", dbUser),
		slog.String("reason", reason))
	fmt.Fprintf(stdout, "cursor %s moved from %d to %d\n", id, cur.Block, to)
	return nil
}
