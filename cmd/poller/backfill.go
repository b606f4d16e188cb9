package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/config"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
)

// Exit codes of an interrupted backfill: 128 + the signal.
const (
	exitInterrupted = 130 // SIGINT
	exitTerminated  = 143 // SIGTERM
)

// progressEvery is how often a backfill reports progress.
const progressEvery = 5 * time.Second

// blockArg is a block number or "finalized".
type blockArg struct {
	set bool
	n   int64 // -1 for finalized
}

func (b *blockArg) String() string {
	if !b.set {
		return ""
	}
	if b.n < 0 {
		return "finalized"
	}
	return strconv.FormatInt(b.n, 10)
}

func (b *blockArg) Set(s string) error {
	if s == "finalized" {
		b.set, b.n = true, -1
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 62)
	if err != nil {
		return errors.New(`want a block number or "finalized"`)
	}
	b.set, b.n = true, int64(n)
	return nil
}

// rangeFlags parses --from N --to M|finalized and --group NAME, shared by
// backfill and verify.
func rangeFlags(fs *flag.FlagSet) (from *int64, to *blockArg, group *groupArg) {
	from = fs.Int64("from", 0, "first block")
	to = &blockArg{}
	fs.Var(to, "to", `last block, or "finalized" for the finality target now`)
	return from, to, addGroupFlag(fs, true)
}

// rangeCommand parses fs (with rangeFlags) and starts the command, printing
// every problem of the flags and the configuration, one line each; it
// returns nil and exit code 2 when there were any.
func rangeCommand(fs *flag.FlagSet, args []string, from *int64, to *blockArg, group *groupArg, stderr io.Writer) (*command, int) {
	if err := fs.Parse(args); err != nil {
		return nil, exitUsage
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("%s: unexpected arguments %q", fs.Name(), fs.Args()))
	}
	if *from < 0 || *from > chain.MaxBlock {
		problems = append(problems, fmt.Sprintf("%s: --from %d is not a block number", fs.Name(), *from))
	}
	if !to.set {
		problems = append(problems, fs.Name()+`: --to is required (a block number or "finalized")`)
	} else if to.n >= 0 && *from > to.n {
		problems = append(problems, fmt.Sprintf("%s: --from %d is after --to %d", fs.Name(), *from, to.n))
	}
	return newCommand(stderr, config.ScopeRun, problems, group)
}

func cmdBackfill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller backfill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from, to, group := rangeFlags(fs)
	restart := fs.Bool("restart", false, "start over from --from instead of resuming")
	chunk := fs.Uint64("chunk", 0, "most blocks per transaction (default: ranges sized as the live loop sizes them, for up to min(TX_TIMEOUT/4, 2s))")
	ignoreHook := fs.Bool("allow-hook-mismatch", false, "record even though PAYMENT_HOOK_SQL differs from the hook the group recorded (the payments this backfill inserts get this hook's side effect, or none)")
	c, code := rangeCommand(fs, args, from, to, group, stderr)
	if c == nil {
		return code
	}
	defer c.stop()
	ctx, log := c.ctx, c.log

	pt, err := c.openGroup(false)
	if err != nil {
		log.Error("starting", slog.Any("err", err))
		return exitFailure
	}
	defer pt.close()
	prep := c.prep()
	prep.IgnoreGroupHook, prep.ReplaceGroupHook = *ignoreHook, false
	hook, err := service.Prepare(ctx, prep, pt.deps(log), func() {})
	if err != nil {
		log.Error("start-up failed", slog.Any("err", err))
		return interruptedOr(c.signalled(), exitCode(err))
	}
	wcfg := service.Writer(c.writerConfig(), hook, c.cfg.PaymentHookSQL)
	wcfg.IgnoreGroupHook = *ignoreHook
	w := poller.NewWriter(wcfg, pt.store, pt.nodes(), pt.metrics(), log)

	id := poller.BackfillID(c.cfg.GroupCursor(), wcfg.Contracts, *from, to.String())
	rep := newReporter(stderr, log)
	prog, err := poller.Backfill(ctx, w, poller.BackfillConfig{
		ID: id, From: *from, To: to.n, Chunk: *chunk, Restart: *restart, Progress: rep.update,
	})
	rep.finish(prog)

	summary := struct {
		poller.BackfillProgress
		Error string `json:"error,omitempty"`
	}{BackfillProgress: prog}
	if err != nil {
		summary.Error = err.Error()
	}
	_ = json.NewEncoder(stdout).Encode(summary)

	switch {
	case err == nil && prog.Complete:
		log.Info("backfill complete", slog.String("cursor_id", id), slog.Int64("blocks", prog.Total),
			slog.Int64("inserted", prog.Inserted), slog.Int64("duplicates", prog.Duplicates))
		return exitOK
	case errors.Is(err, poller.ErrInterrupted):
		log.Info("backfill interrupted after its current chunk; run again with the same arguments to resume", slog.String("cursor_id", id))
		return interruptedOr(c.signalled(), exitFailure)
	case errors.Is(err, poller.ErrNotFinal), errors.Is(err, payments.ErrHookMismatch):
		log.Error("backfill refused", slog.Any("err", err))
		return exitUsage
	case c.signalled() != nil:
		log.Info("backfill interrupted; run again with the same arguments to resume", slog.Any("err", err), slog.String("cursor_id", id))
		return interruptedOr(c.signalled(), exitFailure)
	}
	log.Error("backfill failed; run again with the same arguments to resume", slog.Any("err", err), slog.String("cursor_id", id))
	return exitFailure
}

// interruptedOr is the exit code after a signal, else code.
func interruptedOr(s os.Signal, code int) int {
	switch s {
	case syscall.SIGINT:
		return exitInterrupted
	case syscall.SIGTERM:
		return exitTerminated
	}
	return code
}

// reporter shows a backfill's progress: a log line every few seconds, and a
// progress bar instead when stderr is a terminal.
type reporter struct {
	w   io.Writer
	log *slog.Logger
	tty bool
	// now is the clock (time.Now; tests set their own).
	now  func() time.Time
	mu   sync.Mutex
	last time.Time
}

func newReporter(w io.Writer, log *slog.Logger) *reporter {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &reporter{w: w, log: log, tty: tty, now: time.Now, last: time.Now()}
}

func (r *reporter) update(p poller.BackfillProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Sub(r.last) < progressEvery && !r.tty {
		return
	}
	r.last = r.now()
	r.show(p)
}

func (r *reporter) finish(p poller.BackfillProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.show(p)
	if r.tty {
		fmt.Fprintln(r.w)
	}
}

func (r *reporter) show(p poller.BackfillProgress) {
	// The rate of this run: blocks an earlier run did are not counted.
	rate, eta := 0.0, time.Duration(0)
	if p.Elapsed > 0 {
		rate = float64(p.Done-p.DoneBefore) / p.Elapsed
	}
	if rate > 0 {
		eta = time.Duration(float64(p.Total-p.Done) / rate * float64(time.Second)).Round(time.Second)
	}
	if r.tty {
		const width = 30
		filled := 0
		if p.Total > 0 {
			filled = int(int64(width) * p.Done / p.Total)
		}
		fmt.Fprintf(r.w, "\r[%s%s] %d/%d blocks  %d logs  %d new  %d dup  %.0f blocks/s  ETA %s   ",
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled), p.Done, p.Total,
			p.Logs, p.Inserted, p.Duplicates, rate, eta)
		return
	}
	r.log.Info("backfill progress", slog.Int64("blocks_done", p.Done), slog.Int64("blocks_total", p.Total),
		slog.Int64("logs", p.Logs), slog.Int64("inserted", p.Inserted), slog.Int64("duplicates", p.Duplicates),
		slog.Float64("blocks_per_second", rate), slog.Duration("eta", eta))
}
