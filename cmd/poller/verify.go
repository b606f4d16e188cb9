package main

import (
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/burnpoller/burnpoller/poller"
	"github.com/burnpoller/burnpoller/service"
)

// exitUnverified: verify could not complete (node or database trouble).
const exitUnverified = 3

func cmdVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("poller verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from, to, group := rangeFlags(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	chunk := fs.Uint64("chunk", 0, "most blocks per eth_getLogs call (default: as the live loop, MAX_BLOCK_RANGE growing on sparse chains)")
	c, code := rangeCommand(fs, args, from, to, group, stderr)
	if c == nil {
		return code
	}
	defer c.stop()
	ctx, log, cfg := c.ctx, c.log, c.cfg

	// Verify never writes: the database enforces it for every session.
	pt, err := c.openGroup(true)
	if err != nil {
		log.Error("starting", slog.Any("err", err))
		return exitUnverified
	}
	defer pt.close()
	if err := service.Ready(ctx, pt.deps(log)); err != nil {
		log.Error("starting", slog.Any("err", err))
		return exitUnverified
	}
	if *chunk == 0 {
		*chunk = cfg.MaxRange()
	}
	v := poller.NewVerifier(pt.store, pt.nodes(), cfg.ChainID, poller.Addresses(cfg.Contracts()))
	rep, err := v.Verify(ctx, *from, to.n, *chunk)
	if err != nil {
		log.Error("verify could not complete", slog.Any("err", err))
		return exitUnverified
	}
	if *asJSON {
		out := struct {
			poller.VerifyReport
			Clean bool `json:"clean"`
		}{rep, rep.Clean()}
		_ = json.NewEncoder(stdout).Encode(out)
	} else {
		printReport(stdout, rep)
	}
	if !rep.Clean() {
		return exitFailure
	}
	return exitOK
}

func printReport(w io.Writer, r poller.VerifyReport) {
	state := "clean"
	if !r.Clean() {
		state = "DISCREPANCIES"
	}
	fmt.Fprintf(w, "verify blocks %d..%d: %s\n", r.From, r.To, state)
	fmt.Fprintf(w, "  burns on chain: %d   payments in ledger: %d\n", r.ChainBurns, r.LedgerRows)
	fmt.Fprintf(w, "  missing: %d   extra: %d   mismatched: %d\n", r.Missing, r.Extra, r.Mismatched)
	if r.Orphaned > 0 {
		fmt.Fprintf(w, "  orphaned (marked at a cursor reset, not on the canonical chain; not counted): %d\n", r.Orphaned)
	}
	if r.Undecodable > 0 {
		fmt.Fprintf(w, "  undecodable burn-event logs on chain (see rejected_logs): %d\n", r.Undecodable)
	}
	if len(r.Discrepancies) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tBLOCK\tTX\tLOG\tDETAIL")
	for _, d := range r.Discrepancies {
		detail := ""
		switch d.Kind {
		case poller.Missing:
			detail = fmt.Sprintf("payer %s amount %s digest %s", d.Chain.Payer, d.Chain.Amount, d.Chain.Digest)
		case poller.Extra:
			detail = fmt.Sprintf("payment %d: payer %s amount %s block hash %s (not on the canonical chain)",
				d.Ledger.ID, d.Ledger.Payer, d.Ledger.Amount, d.Ledger.BlockHash)
		case poller.Mismatched:
			var parts []string
			for _, f := range d.Fields {
				parts = append(parts, fmt.Sprintf("%s: chain %s, ledger %s", f, field(d.Chain, f), field(d.Ledger, f)))
			}
			detail = fmt.Sprintf("payment %d: %s", d.Ledger.ID, strings.Join(parts, "; "))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", d.Kind, d.Block, d.TxHash, d.LogIndex, detail)
	}
	_ = tw.Flush()
	if listed := len(r.Discrepancies); listed < r.Missing+r.Extra+r.Mismatched {
		fmt.Fprintf(w, "(%d more not listed)\n", r.Missing+r.Extra+r.Mismatched-listed)
	}
}

func field(p *poller.VerifiedPayment, name string) string {
	switch name {
	case "amount":
		return p.Amount
	case "payer":
		return p.Payer
	case "digest":
		return p.Digest
	case "block_number":
		return fmt.Sprint(p.BlockNumber)
	case "block_hash":
		return p.BlockHash
	}
	return "?"
}
