package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/consume"
	"github.com/burnpoller/burnpoller/database"
	"github.com/burnpoller/burnpoller/db/migrations"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/service"
)

// eventsPage is how many events one read returns.
const eventsPage = 1000

// eventsRecheck is how often --follow reads the table without a
// notification: a notification is only a wake-up, and one may be lost
// while the session reconnects.
const eventsRecheck = 5 * time.Second

// eventsRemembered is how many printed events --follow remembers (seq and
// event_id), to find where to go on from when the table loses its tail.
const eventsRemembered = 10_000

// cmdEvents prints payment lifecycle events from payment_events in seq
// order: those after --since, then, with --follow, each as it commits
// (consume.Follower: a notification on burnpoller_events only says when to
// read, and what is printed always comes from the table). When the table
// no longer holds what was printed (an asynchronous failover lost its
// tail), it goes on after the last printed event the table still holds,
// says so, and prints what follows again. `poller tail` is `poller events
// --follow` from the current last event.
func cmdEvents(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	since := fs.Int64("since", -1, "print the events after this seq (default: every event; for tail, the events from now on)")
	follow := fs.Bool("follow", name == "tail", "keep printing events as they commit, until SIGINT or SIGTERM")
	asJSON := fs.Bool("json", false, "print each event as a JSON line (the webhook body, every value in full)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "poller %s: unexpected arguments %q\n", name, fs.Args())
		return exitUsage
	}
	if *since < -1 {
		fmt.Fprintf(stderr, "poller %s: --since %d is negative\n", name, *since)
		return exitUsage
	}
	return dbCommand(stderr, nil, func(ctx context.Context, c *command, pool *pgxpool.Pool) int {
		cfg, log := c.cfg, c.log
		p := &eventPrinter{store: payments.NewStore(pool), pool: pool, w: stdout, asJSON: *asJSON, now: time.Now}
		start, err := startPosition(ctx, pool, *since, name == "tail")
		if err != nil {
			log.Error("reading events", slog.Any("err", err))
			if errors.Is(err, errSinceAhead) {
				return exitUsage
			}
			return exitFailure
		}
		if !*follow {
			if err := p.catchUp(ctx, start.Seq); err != nil {
				log.Error("reading events", slog.Any("err", err))
				return exitFailure
			}
			return exitOK
		}
		// LISTEN needs a session of its own: DATABASE_DIRECT_URL when
		// DATABASE_URL goes through a transaction pooler.
		sessions, err := database.OpenSessions(ctx, cfg.Database(), migrations.SessionName("burnpoller"))
		if err != nil {
			log.Error("connecting to the database", slog.Any("err", err))
			return exitUsage
		}
		defer sessions.Close()
		if err := sessions.Check(ctx, "--follow (LISTEN)"); errors.Is(err, database.ErrNoSessions) {
			log.Error("following events", slog.Any("err", err))
			return exitUsage
		}
		if err := p.follow(ctx, start, sessions.Pool, log); err != nil {
			log.Error("following events", slog.Any("err", err))
			return exitFailure
		}
		return exitOK
	})
}

// errSinceAhead means --since names a seq the table does not reach.
var errSinceAhead = errors.New("--since is beyond the last event")

// startPosition is where printing starts: after --since, after the last
// event for tail, else from the first.
func startPosition(ctx context.Context, pool *pgxpool.Pool, since int64, tail bool) (consume.Position, error) {
	switch {
	case since < 0 && tail:
		return consume.LastPosition(ctx, pool)
	case since <= 0:
		return consume.Position{}, nil
	}
	last, err := consume.LastPosition(ctx, pool)
	if err != nil {
		return consume.Position{}, err
	}
	if since > last.Seq {
		return consume.Position{}, fmt.Errorf("%w: --since %d, last seq %d", errSinceAhead, since, last.Seq)
	}
	return consume.PositionAt(ctx, pool, since)
}

// eventPrinter prints events in seq order, each once.
type eventPrinter struct {
	store  *payments.Store
	pool   *pgxpool.Pool
	w      io.Writer
	asJSON bool
	now    func() time.Time
	// printed are the positions of the events printed last, oldest first.
	printed []consume.Position
}

// catchUp prints every committed event after seq after.
func (p *eventPrinter) catchUp(ctx context.Context, after int64) error {
	for {
		evs, err := p.store.Events(ctx, after, eventsPage)
		if err != nil {
			return err
		}
		if err := p.printAll(ctx, evs); err != nil {
			return err
		}
		if len(evs) < eventsPage {
			return nil
		}
		after = evs[len(evs)-1].Seq
	}
}

// follow prints the events after start, then each as it commits, until
// ctx ends; a lost session is retried with back-off.
func (p *eventPrinter) follow(ctx context.Context, start consume.Position, sessions *pgxpool.Pool, log *slog.Logger) error {
	f, err := consume.NewFollower(p.pool, start, consume.ListenOn(sessions), consume.PollInterval(eventsRecheck),
		consume.BatchSize(eventsPage), consume.Logger(log))
	if err != nil {
		return err
	}
	b := service.StartupBackoff()
	for ctx.Err() == nil {
		if err := f.Start(ctx); err != nil {
			if ctx.Err() != nil {
				break
			}
			wait := b.NextBackOff()
			log.Warn("following events failed; retrying", slog.Any("err", err), slog.Duration("retry_in", wait))
			sleepCtx(ctx, wait)
			continue
		}
		break
	}
	defer f.Stop()
	for ctx.Err() == nil {
		evs, err := f.Next(ctx)
		var diverged *consume.DivergedError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &diverged):
			at, rerr := f.Rewind(ctx, p.printed)
			if errors.Is(rerr, consume.ErrBeyondHanded) {
				// Waiting does not help: the table changed below every
				// event this command still remembers printing.
				return fmt.Errorf("the database no longer holds the events this command printed (an asynchronous failover lost them?), nor any of the last %d it printed: %w; run poller events --since SEQ from a seq you know was applied, and deduplicate on event_id",
					len(p.printed), rerr)
			}
			if rerr != nil {
				err = rerr
				break
			}
			p.forgetAfter(at.Seq)
			log.Warn("the database no longer holds events this command printed (an asynchronous failover lost them?); going on after the last printed event it still holds: the events after it are printed again, with their event_id",
				slog.Int64("printed_up_to_seq", diverged.At.Seq), slog.Int64("last_seq_now", diverged.Last),
				slog.Int64("going_on_after_seq", at.Seq))
			continue
		case err == nil:
			b.Reset()
			if err := p.printAll(ctx, evs); err != nil {
				return err
			}
			continue
		}
		wait := b.NextBackOff()
		log.Warn("following events failed; retrying", slog.Any("err", err),
			slog.Int64("last_seq", f.Position().Seq), slog.Duration("retry_in", wait))
		sleepCtx(ctx, wait)
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// forgetAfter drops the printed positions above seq: they are printed again.
func (p *eventPrinter) forgetAfter(seq int64) {
	for len(p.printed) > 0 && p.printed[len(p.printed)-1].Seq > seq {
		p.printed = p.printed[:len(p.printed)-1]
	}
}

func (p *eventPrinter) printAll(ctx context.Context, evs []payments.Event) error {
	var heads map[uint64]int64
	if !p.asJSON && len(evs) > 0 {
		heads = p.heads(ctx)
	}
	for _, e := range evs {
		if err := p.print(e, heads); err != nil {
			return err
		}
		p.printed = append(p.printed, consume.PositionOf(e))
	}
	if n := len(p.printed) - eventsRemembered; n > 0 {
		p.printed = append(p.printed[:0], p.printed[n:]...)
	}
	return nil
}

// heads reads the head of each chain as head tracking last recorded it, for
// confirmations; none when it cannot (the line then shows none).
func (p *eventPrinter) heads(ctx context.Context) map[uint64]int64 {
	out := map[uint64]int64{}
	rows, err := p.pool.Query(ctx, `SELECT chain_id, block_number FROM chain_heads`)
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var (
			chainID int64
			block   int64
		)
		if rows.Scan(&chainID, &block) == nil {
			out[uint64(chainID)] = block
		}
	}
	return out
}

func (p *eventPrinter) print(e payments.Event, heads map[uint64]int64) error {
	if p.asJSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(p.w, eventLine(e, heads, p.now()))
	return err
}

// lineWidth is the terminal a human line is made for. Every field but the
// seq and the block has a most width, so a line fits when those two have
// 11 digits together (seq 812 at block 21000000) whatever the amount and
// the date, 14 with an amount of up to six characters (1.5e18); a reason
// is cut to fit.
const lineWidth = 80

// amountWidth is the most characters an amount takes on a human line.
const amountWidth = 9

// maxConfirmations is the most confirmations a human line counts; more are
// shown as "9999+": the event is deep, and its block says how deep.
const maxConfirmations = 9999

// eventLine is one event for a person at a terminal, in at most lineWidth
// characters for realistic values: the time it was recorded (UTC; the
// time of day today, the date otherwise), seq, kind, amount (shortAmount),
// payer and transaction shortened (shortHex), block, confirmations (as head
// tracking last saw the head; none for a retracted event, whose burn no
// longer counts), and the reason when there is one, cut to fit. --json
// prints every value in full.
func eventLine(e payments.Event, heads map[uint64]int64, now time.Time) string {
	at, today := e.CreatedAt.UTC(), now.UTC()
	when := at.Format("15:04:05")
	if y, m, d := at.Date(); y != today.Year() || m != today.Month() || d != today.Day() {
		when = at.Format("2006-01-02")
	}
	amount := "-"
	if e.Amount != nil {
		amount = shortAmount(e.Amount.String())
	}
	line := fmt.Sprintf("%s #%d %-9s %s %s %s @%d", when, e.Seq, e.Kind, amount,
		shortHex(e.Payer), shortHex(e.TxHash), e.BlockNumber)
	if h, ok := heads[e.ChainID]; ok && h >= e.BlockNumber && e.Kind != payments.KindRetracted {
		confs := strconv.FormatInt(h-e.BlockNumber+1, 10)
		if h-e.BlockNumber+1 > maxConfirmations {
			confs = strconv.Itoa(maxConfirmations) + "+"
		}
		line += " " + confs + " conf"
	}
	if e.Reason != "" {
		line += " (" + clip(e.Reason, lineWidth-utf8.RuneCountInString(line)-len(" ()")) + ")"
	}
	return line
}

// shortAmount is the decimal integer s in at most amountWidth characters,
// exact whenever it can be: s itself when it fits, else s in
// scientific notation with every significant digit ("1e18" is
// 1000000000000000000, "1.5e18" is 1500000000000000000), else its leading
// digits, an ellipsis for the digits left out, and the exponent
// ("1.157…e77": 1.157 and more digits, times 10^77). No rounding: the
// digits shown are the amount's own.
func shortAmount(s string) string {
	const width = amountWidth
	if len(s) <= width {
		return s
	}
	exp := "e" + strconv.Itoa(len(s)-1)
	digits := strings.TrimRight(s, "0")
	exact := digits[:1]
	if len(digits) > 1 {
		exact += "." + digits[1:]
	}
	if len(exact)+len(exp) <= width {
		return exact + exp
	}
	// The first digit, the point, the next digits, the ellipsis, the exponent.
	return digits[:1] + "." + digits[1:width-len(exp)-2] + "…" + exp
}

// shortHex is a hash or address as its first and last four hex digits
// around an ellipsis (0x3f1c…a2e1); s when it is no longer than that.
func shortHex(s string) string {
	const keep = 4
	hex := strings.TrimPrefix(s, "0x")
	if len(hex) <= 2*keep+1 {
		return s
	}
	return s[:len(s)-len(hex)] + hex[:keep] + "…" + hex[len(hex)-keep:]
}

// clip keeps s when it has at most n characters, else its first n-1 and an
// ellipsis (just the ellipsis when n < 2).
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}
