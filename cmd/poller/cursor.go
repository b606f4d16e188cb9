package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
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
	group := addGroupFlag(fs, false)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fmt.Fprintf(stderr, "poller cursor show: unexpected arguments %q\n", fs.Args())
		}
		return exitUsage
	}
	return dbCommand(stderr, group, func(ctx context.Context, c *command, pool *pgxpool.Pool) int {
		return showCursors(ctx, c, pool, *asJSON, stdout)
	})
}

// shownCursor is a cursor as `poller cursor show` prints it.
type shownCursor struct {
	Group     string    `json:"group,omitempty"`
	ID        string    `json:"id"`
	Block     int64     `json:"last_processed_block"`
	Hash      string    `json:"last_processed_hash"`
	UpdatedAt time.Time `json:"updated_at"`
}

// showCursors prints the configured groups' cursors: the one --group
// names, or, with GROUPS, every group's; without a group configured,
// every cursor of the database.
func showCursors(ctx context.Context, c *command, pool *pgxpool.Pool, asJSON bool, stdout io.Writer) int {
	store := payments.NewStore(pool)
	cursors, err := store.Cursors(ctx)
	if err != nil {
		c.log.Error("reading cursors", slog.Any("err", err))
		return exitFailure
	}
	groups := []config.Group{{Name: c.group, Config: c.cfg}}
	if c.set.Named() && c.group == "" {
		groups = c.set.Groups
	}
	var shown []shownCursor
	for _, g := range groups {
		id := cursorIDIfConfigured(g.Config)
		if id == "" {
			continue
		}
		if g.CursorID == "" {
			if id, err = poller.ResolveGroup(ctx, store, g.ChainID, poller.Addresses(g.Contracts()), id); err != nil {
				c.log.Error("finding the group", slog.String("group", g.Name), slog.Any("err", err))
				return exitFailure
			}
		}
		i := slices.IndexFunc(cursors, func(cur payments.Cursor) bool { return cur.ID == id })
		if i < 0 {
			c.log.Error("no such cursor", slog.String("group", g.Name), slog.String("cursor_id", id))
			return exitFailure
		}
		cur := cursors[i]
		shown = append(shown, shownCursor{g.Name, cur.ID, cur.Block, cur.Hash, cur.UpdatedAt})
	}
	if shown == nil {
		for _, cur := range cursors {
			shown = append(shown, shownCursor{"", cur.ID, cur.Block, cur.Hash, cur.UpdatedAt})
		}
	}
	if asJSON {
		if shown == nil {
			shown = []shownCursor{}
		}
		if err := json.NewEncoder(stdout).Encode(shown); err != nil {
			return exitFailure
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if c.set.Named() {
		fmt.Fprintln(tw, "GROUP\tCURSOR\tBLOCK\tHASH\tUPDATED")
	} else {
		fmt.Fprintln(tw, "CURSOR\tBLOCK\tHASH\tUPDATED")
	}
	for _, cur := range shown {
		hash := cur.Hash
		if hash == "" {
			hash = "-"
		}
		if c.set.Named() {
			fmt.Fprintf(tw, "%s\t", cmp.Or(cur.Group, "-"))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", cur.ID, cur.Block, hash, cur.UpdatedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
	return exitOK
}

// cursorIDIfConfigured is the configured group's cursor id, or "" when
// neither CURSOR_ID nor CHAIN_ID and BURN_CONTRACT are set.
func cursorIDIfConfigured(cfg config.Config) string {
	if cfg.CursorID != "" {
		return cfg.CursorID
	}
	if cfg.ChainID != 0 && cfg.BurnContract != "" {
		return cfg.GroupCursor()
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
	group := addGroupFlag(fs, true)
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
	c, code := newCommand(stderr, config.ScopeRun, nil, group)
	if c == nil {
		return code
	}
	defer c.stop()
	if err := resetCursor(c, *to, poller.ResetOptions{AllowSkip: *allowSkip, MarkOrphaned: true, Wait: *wait}, *reason, stdout); err != nil {
		c.log.Error("cursor reset failed", slog.Any("err", err))
		if errors.Is(err, poller.ErrCursorLocked) || errors.Is(err, poller.ErrSkipRefused) || errors.Is(err, poller.ErrBeyondTarget) {
			return exitUsage
		}
		return exitFailure
	}
	return exitOK
}

// resetCursor moves the group's cursor to block to through the library's
// rules (poller.Writer.Reset) and logs who did it and why.
func resetCursor(c *command, to int64, opts poller.ResetOptions, reason string, stdout io.Writer) error {
	ctx, log := c.ctx, c.log
	pt, err := c.openGroup(false)
	if err != nil {
		return err
	}
	defer pt.close()
	if err := service.Ready(ctx, pt.deps(log)); err != nil {
		return err
	}
	id := c.cfg.GroupCursor()
	if c.cfg.CursorID == "" {
		if id, err = poller.ResolveGroup(ctx, pt.store, c.cfg.ChainID, poller.Addresses(c.cfg.Contracts()), id); err != nil {
			return err
		}
	}
	w := poller.NewWriter(c.writerConfig(), pt.store, pt.nodes(), nil, log)
	res, err := w.Reset(ctx, id, to, opts)
	if err != nil {
		return err
	}
	osUser := "unknown"
	if u, err := user.Current(); err == nil {
		osUser = u.Username
	}
	host, _ := os.Hostname()
	log.Warn("cursor reset", slog.String("cursor_id", id),
		slog.Int64("from_block", res.From.Block), slog.String("from_hash", res.From.Hash),
		slog.Int64("to_block", res.To), slog.String("to_hash", res.Hash),
		slog.Int("orphaned", len(res.Orphaned)),
		slog.String("os_user", osUser), slog.String("host", host), slog.String("db_user", res.DBUser),
		slog.String("reason", reason))
	fmt.Fprintf(stdout, "cursor %s moved from %d to %d\n", id, res.From.Block, res.To)
	if n := len(res.Orphaned); n > 0 {
		fmt.Fprintf(stdout, "%d payments above block %d are not on the canonical chain; marked orphaned (payments.orphaned_at), kept for reconciliation:\n", n, res.To)
		for _, p := range res.Orphaned {
			fmt.Fprintf(stdout, "  payment %d block %d tx %s log %d payer %s amount %s\n", p.ID, p.BlockNumber, p.TxHash, p.LogIndex, p.Payer, p.Amount)
		}
	}
	return nil
}
