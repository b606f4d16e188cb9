package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/service"
)

// eventsPage is how many events one read returns.
const eventsPage = 1000

// eventsRecheck is how often --follow reads the table without a
// notification: a notification is only a wake-up, and one may be lost
// while the session reconnects.
const eventsRecheck = 5 * time.Second

// cmdEvents prints payment lifecycle events from payment_events in seq
// order: those after --since, then, with --follow, each as it commits.
// Seqs are gap-free in commit order, so reading "seq > last" never misses
// one; a notification on burnpoller_events only says when to read (anyone
// who can connect may send one), and what is printed always comes from the
// table. After a lost session it resumes after the last seq printed.
// `poller tail` is `poller events --follow` from the current last event.
func cmdEvents(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	since := fs.Int64("since", -1, "print the events after this seq (default: every event; for tail, the events from now on)")
	follow := fs.Bool("follow", name == "tail", "keep printing events as they commit, until SIGINT or SIGTERM")
	asJSON := fs.Bool("json", false, "print each event as a JSON line (the webhook body)")
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
	return dbCommand(stderr, scopeMigrate, func(ctx context.Context, cfg Config, log *slog.Logger, pool *pgxpool.Pool) int {
		p := &eventPrinter{store: payments.NewStore(pool), w: stdout, asJSON: *asJSON, last: max(*since, 0)}
		if *since < 0 && name == "tail" {
			p.last = -1 // from the last event when it first connects
		}
		if !*follow {
			if err := p.catchUp(ctx); err != nil {
				log.Error("reading events", slog.Any("err", err))
				return exitFailure
			}
			return exitOK
		}
		// LISTEN needs a session of its own: DATABASE_DIRECT_URL when
		// DATABASE_URL goes through a transaction pooler.
		sessions, direct, err := newSessionPool(ctx, cfg, "burnpoller")
		if err != nil {
			log.Error("connecting to the database", slog.Any("err", err))
			return exitUsage
		}
		defer sessions.Close()
		if err := checkSessions(ctx, sessions, direct, "--follow (LISTEN)"); errors.Is(err, payments.ErrNoSessions) {
			log.Error("following events", slog.Any("err", err))
			return exitUsage
		}
		b := service.StartupBackoff()
		for ctx.Err() == nil {
			err := p.follow(ctx, sessions)
			if ctx.Err() != nil {
				break
			}
			wait := b.NextBackOff()
			log.Warn("following events failed; reconnecting", slog.Any("err", err),
				slog.Int64("last_seq", p.last), slog.Duration("retry_in", wait))
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		return exitOK
	})
}

// eventPrinter prints events after last, in seq order, each once.
type eventPrinter struct {
	store  *payments.Store
	w      io.Writer
	asJSON bool
	last   int64
}

// catchUp prints every committed event after the last printed.
func (p *eventPrinter) catchUp(ctx context.Context) error {
	for {
		evs, err := p.store.Events(ctx, p.last, eventsPage)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := p.print(e); err != nil {
				return err
			}
			p.last = e.Seq
		}
		if len(evs) < eventsPage {
			return nil
		}
	}
}

// follow LISTENs on one session, catches up, and catches up again on each
// notification (or every eventsRecheck) until the session fails or ctx
// ends.
func (p *eventPrinter) follow(ctx context.Context, pool *pgxpool.Pool) error {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a session to listen on: %w", err)
	}
	// A LISTENing session is never returned to the pool.
	conn := pc.Hijack()
	defer func() {
		// Bounded: a hung socket must not hold the exit.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+payments.EventsChannel); err != nil {
		return fmt.Errorf("listening on %s: %w", payments.EventsChannel, err)
	}
	if p.last < 0 {
		last, err := p.store.LastSeq(ctx)
		if err != nil {
			return err
		}
		p.last = last
	}
	for {
		// Listening first, then reading: nothing committed in between
		// goes unnoticed.
		if err := p.catchUp(ctx); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, eventsRecheck)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		// Only the recheck's own timeout on a live session is not a
		// failure.
		if err != nil && (ctx.Err() != nil || wctx.Err() == nil || conn.IsClosed()) {
			return fmt.Errorf("waiting for a notification: %w", err)
		}
	}
}

func (p *eventPrinter) print(e payments.Event) error {
	if p.asJSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	payment := "-"
	if e.PaymentID != 0 {
		payment = fmt.Sprint(e.PaymentID)
	}
	_, err := fmt.Fprintf(p.w, "seq=%d kind=%s chain=%d tx=%s log=%d block=%d block_hash=%s payer=%s digest=%s amount=%s payment=%s\n",
		e.Seq, e.Kind, e.ChainID, e.TxHash, e.LogIndex, e.BlockNumber, e.BlockHash, e.Payer, e.Digest, e.Amount, payment)
	return err
}
