package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/payments"
)

// cmdTail prints every payment as its transaction commits, by LISTENing on
// the notification channel: the live view of make demo, and an example of
// reacting to payments without polling.
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
		b := startupBackoff()
		for ctx.Err() == nil {
			err := tail(ctx, pool, *asJSON, stdout)
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

func tail(ctx context.Context, pool *pgxpool.Pool, asJSON bool, w io.Writer) error {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing session is never returned to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+payments.NotifyChannel); err != nil {
		return err
	}
	store := payments.NewStore(pool)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var note payments.Notification
		if err := json.Unmarshal([]byte(n.Payload), &note); err != nil {
			return fmt.Errorf("notification %q: %w", n.Payload, err)
		}
		items := note.Payments
		if len(items) == 0 && note.Count > 0 {
			// A large transaction names its id range; read the rows.
			recs, err := store.PaymentsByID(ctx, note.FirstID, note.LastID)
			if err != nil {
				return err
			}
			for _, r := range recs {
				items = append(items, payments.NotifiedItem{ID: r.ID, TxHash: r.TxHash, LogIndex: r.LogIndex,
					BlockNumber: r.BlockNumber, Payer: r.Payer, Digest: r.Digest, Amount: r.Amount.String()})
			}
		}
		for _, it := range items {
			if asJSON {
				if err := json.NewEncoder(w).Encode(it); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(w, "payment %-8d block %-8d payer %s amount %s digest %s\n", it.ID, it.BlockNumber, it.Payer, it.Amount, it.Digest)
		}
	}
}
