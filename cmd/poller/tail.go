package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/service"
)

// tailMemory is how many printed ids tail remembers above its floor.
const tailMemory = 100_000

// cmdTail prints every payment committed after it starts, as its
// transaction commits: the live view of make demo, and an example of
// reacting to payments without polling. It LISTENs on the notification
// channel, but any role that can connect may NOTIFY on it with whatever it
// likes, so a notification is only a hint to read the payments table: what
// tail prints comes from the table, never from a payload. After a lost
// session it catches up on the ids above the highest it printed.
func cmdTail(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print each payment as a JSON line")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "poller tail: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	return dbCommand(stderr, scopeMigrate, func(ctx context.Context, _ Config, log *slog.Logger, pool *pgxpool.Pool) int {
		t := &tailer{store: payments.NewStore(pool), w: stdout, asJSON: *asJSON, log: log}
		b := service.StartupBackoff()
		for ctx.Err() == nil {
			err := t.listen(ctx, pool)
			if ctx.Err() != nil {
				break
			}
			wait := b.NextBackOff()
			log.Warn("listening failed; reconnecting", slog.Any("err", err), slog.Duration("retry_in", wait))
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		return exitOK
	})
}

// tailer prints payments read from the table, each id once.
type tailer struct {
	store   *payments.Store
	w       io.Writer
	asJSON  bool
	log     *slog.Logger
	started bool
	printed printedIDs
}

// listen LISTENs on one session and prints what each notification points
// at until the session fails or ctx ends. The first call fixes the start:
// payments committed before it are not printed.
func (t *tailer) listen(ctx context.Context, pool *pgxpool.Pool) error {
	if !t.started {
		last, err := t.store.LastPaymentID(ctx)
		if err != nil {
			return err
		}
		t.printed = newPrintedIDs(last, tailMemory)
		t.started = true
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring a session to listen on: %w", err)
	}
	// A LISTENing session is never returned to the pool.
	conn := pc.Hijack()
	defer func() {
		// Bounded: a hung socket must not hold tail's exit.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+payments.NotifyChannel); err != nil {
		return fmt.Errorf("listening on %s: %w", payments.NotifyChannel, err)
	}
	// What committed since the start, or while the last session was
	// down, notified nobody here.
	if err := t.show(ctx, nil); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for a notification: %w", err)
		}
		var note payments.Notification
		if err := json.Unmarshal([]byte(n.Payload), &note); err != nil {
			// Not ours; still a reason to look. The payload is not
			// logged: anyone may have sent it.
			t.log.Debug("notification payload is not a payments notification; reading the table", slog.Int("bytes", len(n.Payload)))
			if err := t.show(ctx, nil); err != nil {
				return err
			}
			continue
		}
		if err := t.show(ctx, &note); err != nil {
			return err
		}
	}
}

// show prints, in id order, the payments not printed yet among those above
// the highest id printed and those in the id range note names: a backfill
// beside the live loop commits its ids after higher ones, and its
// notification names them. note may be nil.
func (t *tailer) show(ctx context.Context, note *payments.Notification) error {
	high := t.printed.high
	recs, err := t.store.PaymentsByID(ctx, high+1, math.MaxInt64)
	if err != nil {
		return err
	}
	if note != nil {
		// Ids above high were read just now, and those at or below the
		// floor are never printed: whatever range a payload names, only
		// rows between the two are read, and only unprinted ones shown.
		first, last := max(note.FirstID, t.printed.floor+1), min(note.LastID, high)
		if first <= last {
			older, err := t.store.PaymentsByID(ctx, first, last)
			if err != nil {
				return err
			}
			recs = append(older, recs...)
		}
	}
	slices.SortFunc(recs, func(a, b payments.Recorded) int { return cmp.Compare(a.ID, b.ID) })
	for _, r := range recs {
		if t.printed.has(r.ID) {
			continue
		}
		if err := t.print(r); err != nil {
			return err
		}
		t.printed.add(r.ID)
	}
	return nil
}

func (t *tailer) print(r payments.Recorded) error {
	it := payments.NotifiedItem{ID: r.ID, TxHash: r.TxHash, LogIndex: r.LogIndex, BlockNumber: r.BlockNumber,
		Payer: r.Payer, Digest: r.Digest, Amount: r.Amount.String()}
	if t.asJSON {
		return json.NewEncoder(t.w).Encode(it)
	}
	_, err := fmt.Fprintf(t.w, "payment %-8d block %-8d payer %s amount %s digest %s\n", it.ID, it.BlockNumber, it.Payer, it.Amount, it.Digest)
	return err
}

// printedIDs is which payment ids were printed, in bounded memory: every id
// at or below floor counts as printed (it was committed before the start,
// or forgotten to stay within limit), and above it ids holds each one
// printed. So no id is ever printed twice; the price of the bound is that a
// payment committed so late that limit/2 higher ids were printed since is
// not printed at all.
type printedIDs struct {
	floor int64
	high  int64 // the highest id printed, or floor
	ids   map[int64]struct{}
	limit int
}

func newPrintedIDs(floor int64, limit int) printedIDs {
	return printedIDs{floor: floor, high: floor, ids: map[int64]struct{}{}, limit: limit}
}

func (p *printedIDs) has(id int64) bool {
	_, ok := p.ids[id]
	return ok || id <= p.floor
}

func (p *printedIDs) add(id int64) {
	p.ids[id] = struct{}{}
	p.high = max(p.high, id)
	if len(p.ids) <= p.limit {
		return
	}
	// Forget the lower half.
	sorted := slices.Sorted(maps.Keys(p.ids))
	drop := sorted[:len(sorted)-p.limit/2]
	p.floor = drop[len(drop)-1]
	for _, id := range drop {
		delete(p.ids, id)
	}
}
