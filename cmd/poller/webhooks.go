package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/burnpoller/burnpoller/webhooks"
)

// cmdWebhooks is `poller webhooks status [--json]` and
// `poller webhooks retry --dead | --seq N`.
func cmdWebhooks(args []string, stdout, stderr io.Writer) int {
	const use = "usage: poller webhooks status [--json] | poller webhooks retry --dead | --seq N\n"
	if len(args) == 0 {
		fmt.Fprint(stderr, use)
		return exitUsage
	}
	switch args[0] {
	case "status":
		return cmdWebhooksStatus(args[1:], stdout, stderr)
	case "retry":
		return cmdWebhooksRetry(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "poller webhooks: unknown subcommand %q\n%s", args[0], use)
	return exitUsage
}

// cmdWebhooksStatus is `poller webhooks status [--json] [--group NAME]`.
func cmdWebhooksStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller webhooks status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	group := &groupArg{}
	fs.StringVar(&group.name, "group", "", "with GROUPS, count only the events of this group's chain and contracts")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "poller webhooks status: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	return dbCommand(stderr, group, func(ctx context.Context, c *command, pool *pgxpool.Pool) int {
		log := c.log
		var of *webhooks.Burns
		if c.group != "" {
			cs, err := c.cfg.CheckedContracts()
			if err != nil {
				log.Error("the group's contracts", slog.String("group", c.group), slog.Any("err", err))
				return exitUsage
			}
			of = &webhooks.Burns{ChainID: c.cfg.ChainID}
			for _, ct := range cs {
				of.Contracts = append(of.Contracts, strings.ToLower(ct.Address.Hex()))
			}
		}
		st, err := webhooks.StatusOf(ctx, pool, true, of)
		if err != nil {
			log.Error("reading webhook status", slog.Any("err", err))
			return exitFailure
		}
		if *asJSON {
			if st == nil {
				st = []webhooks.EndpointStatus{}
			}
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintln(stdout, string(b))
			return exitOK
		}
		if len(st) == 0 {
			fmt.Fprintln(stdout, "no webhook endpoint registered (WEBHOOK_URL is not set on any replica)")
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENDPOINT\tEVENTS\tBACKLOG\tOLDEST UNDELIVERED\tRETRYING\tDEAD LETTERS\tDELIVERED\tENQUEUED TO SEQ\tLAST ERROR")
		for _, s := range st {
			oldest := "-"
			if s.Backlog > 0 {
				oldest = (time.Duration(s.OldestUndelivered * float64(time.Second))).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%v\t%d\t%s\t%d\t%d\t%d\t%d of %d\t%s\n", s.Endpoint, s.Events, s.Backlog, oldest,
				s.Retrying, s.DeadLetters, s.Delivered, s.EnqueuedSeq, s.LastSeq, cmp.Or(s.LastError, "-"))
		}
		_ = tw.Flush()
		return exitOK
	})
}

// cmdWebhooksRetry is `poller webhooks retry --dead | --seq N`.
func cmdWebhooksRetry(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller webhooks retry", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dead := fs.Bool("dead", false, "re-arm every dead-lettered delivery (retried again for WEBHOOK_MAX_AGE)")
	seq := fs.Int64("seq", 0, "send event N again to every endpoint subscribed to its kind")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 || *dead == (*seq != 0) || *seq < 0 {
		fmt.Fprint(stderr, "poller webhooks retry: give exactly one of --dead or --seq N (N > 0)\n")
		return exitUsage
	}
	return dbCommand(stderr, nil, func(ctx context.Context, c *command, pool *pgxpool.Pool) int {
		log := c.log
		if *dead {
			n, err := webhooks.RetryDead(ctx, pool)
			if err != nil {
				log.Error("retrying dead letters", slog.Any("err", err))
				return exitFailure
			}
			fmt.Fprintf(stdout, "re-armed %d dead-lettered deliveries\n", n)
			return exitOK
		}
		n, err := webhooks.RetrySeq(ctx, pool, *seq)
		if err != nil {
			log.Error("retrying an event", slog.Int64("seq", *seq), slog.Any("err", err))
			return exitFailure
		}
		fmt.Fprintf(stdout, "event %d armed for %d endpoints\n", *seq, n)
		return exitOK
	})
}
