package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
	"github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/rpcfault"
)

// Still is what a chain whose head stands still costs at the provider: a
// chain that seals a block only when it has a transaction (an L3, Polygon
// zkEVM when idle), whose finalized block catches up with the head minutes
// after its last block. One replica at the defaults follows the dev chain
// through a counting proxy (internal/rpcfault) that holds the head at the
// block after a burn's while the node finalizes past it: first with the
// cursor below the held head (the target behind it), then, once the
// target reached the head and the burn was credited, with the cursor at
// the head (an idle chain).
type Still struct {
	PollIntervalS float64            `json:"poll_interval_seconds"`
	Weights       map[string]float64 `json:"compute_units_by_method"`
	// Behind is the window with the cursor below the still head; AtHead
	// the window with the cursor at it.
	Behind *StillWindow `json:"cursor_below_the_head"`
	AtHead *StillWindow `json:"cursor_at_the_head"`
	// CreditSeconds is from the node finalizing past the held head to the
	// cursor at it, the burn credited.
	CreditSeconds float64 `json:"credit_seconds"`
	Load          string  `json:"load_average_at_start"`
}

// StillWindow is one counting window, per hour.
type StillWindow struct {
	Seconds float64 `json:"seconds"`
	// Polls is how many polls the replica made in the window.
	Polls float64 `json:"polls"`
	// CallsPerHour counts the JSON-RPC calls by method (a batch's members
	// one each), and CUPerHour weighs them by Weights.
	CallsPerHour    map[string]float64 `json:"calls_per_hour"`
	CUPerHour       float64            `json:"compute_units_per_hour"`
	RequestsPerHour float64            `json:"http_requests_per_hour"`
}

// stillPollInterval is the poller's default POLL_INTERVAL, which the
// phase runs at.
const stillPollInterval = 2 * time.Second

// stillPhase measures Still on the in-process dev chain, each window
// o.still long.
func (b *bench) stillPhase(ctx context.Context, o options) (*Still, error) {
	const name = "bench_still"
	dbURL, err := freshDB(ctx, b.admin, name)
	if err != nil {
		return nil, err
	}
	defer dropDB(ctx, b.admin, name)
	logDir, err := os.MkdirTemp("", "bench-still-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	c := b.chain
	// The dev chain finalizes every 32nd block: from head base+6 on, the
	// finalized block is base until the head reaches base+32.
	head, err := c.Client().BlockNumber(ctx)
	if err != nil {
		return nil, err
	}
	base := max((head/32+1)*32, 96)
	if err := sealTo(ctx, c, base+6); err != nil {
		return nil, err
	}
	proxy, err := rpcfault.Start(b.info.RPCURL)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	res := &Still{PollIntervalS: stillPollInterval.Seconds(), Weights: chain.DefaultWeights(), Load: loadAverage()}
	r, err := b.startReplicaOn(proxy.URL, b.info.BurnContract, dbURL, logDir, "still",
		// Rescans (64 blocks, every minute) from the first window on.
		"START_BLOCK="+strconv.FormatUint(base-63, 10), "POLL_INTERVAL="+stillPollInterval.String())
	if err != nil {
		return nil, err
	}
	defer r.stop()
	cursorAt := func(n uint64) func() bool {
		return func() bool { return metric(ctx, r.addr, "burnpoller_cursor_block") == float64(n) && polled(ctx, r) }
	}
	if err := harness.WaitFor(ctx, time.Minute, fmt.Sprintf("the cursor at %d", base), cursorAt(base)); err != nil {
		return nil, err
	}

	held, err := burnAndHold(ctx, c, proxy)
	if err != nil {
		return nil, err
	}
	if err := harness.WaitFor(ctx, time.Minute, "the burn seen at the held head", func() bool {
		return metric(ctx, r.addr, "burnpoller_pending_payments") == 1 && metric(ctx, r.addr, "burnpoller_head_block") == float64(held)
	}); err != nil {
		return nil, err
	}
	// Past the longest a block may take (poller.DefaultMaxBlockTime, whatever
	// the heads' timestamps say) and a poll since the replica read the held
	// head: the polls read the target of the still head.
	time.Sleep(30*time.Second + 3*stillPollInterval)
	if res.Behind, err = stillWindow(ctx, r, proxy, o.still, res.Weights); err != nil {
		return nil, err
	}

	start := time.Now()
	if err := sealTo(ctx, c, base+32); err != nil {
		return nil, err
	}
	if err := harness.WaitFor(ctx, 2*time.Minute, fmt.Sprintf("the cursor at the held head %d", held), cursorAt(held)); err != nil {
		return nil, err
	}
	res.CreditSeconds = time.Since(start).Seconds()
	time.Sleep(2 * stillPollInterval)
	if res.AtHead, err = stillWindow(ctx, r, proxy, o.still, res.Weights); err != nil {
		return nil, err
	}

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	n, err := countPayments(ctx, conn)
	if err != nil {
		return nil, err
	}
	if n != 1 {
		return nil, fmt.Errorf("%d payments after the credit, want the 1 burn", n)
	}
	b.log.Info("still head", slog.Float64("behind_cu_per_hour", res.Behind.CUPerHour),
		slog.Float64("at_head_cu_per_hour", res.AtHead.CUPerHour), slog.Float64("credit_seconds", res.CreditSeconds))
	return res, nil
}

// sealTo seals blocks until the head is n.
func sealTo(ctx context.Context, c *devchain.Chain, n uint64) error {
	for {
		head, err := c.Client().BlockNumber(ctx)
		if err != nil || head >= n {
			return err
		}
		c.Seal()
	}
}

// burnAndHold sends a burn, seals until a block holds it and one more,
// and has proxy hold the head there; it returns the held head.
func burnAndHold(ctx context.Context, c *devchain.Chain, proxy *rpcfault.Proxy) (uint64, error) {
	tx, err := c.Burn(ctx, 0, devchain.RandomAmount(), devchain.RandomDigest())
	if err != nil {
		return 0, err
	}
	if err := harness.WaitFor(ctx, time.Minute, "the burn mined", func() bool {
		c.Seal()
		_, err := c.Client().TransactionReceipt(ctx, tx.Hash())
		return err == nil
	}); err != nil {
		return 0, err
	}
	c.Seal()
	held, err := c.Client().BlockNumber(ctx)
	if err != nil {
		return 0, err
	}
	proxy.Set(func(f *rpcfault.Faults) { f.LagAt = &held })
	return held, nil
}

// stillWindow counts what the proxy was asked over d, per hour.
func stillWindow(ctx context.Context, r *replica, proxy *rpcfault.Proxy, d time.Duration, weights chain.Weights) (*StillWindow, error) {
	polls := func() float64 { return metric(ctx, r.addr, "burnpoller_polls_total") }
	before, pollsBefore, start := proxy.Stats(), polls(), time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, took := proxy.Stats(), time.Since(start)
	perHour := time.Hour.Seconds() / took.Seconds()
	w := &StillWindow{Seconds: took.Seconds(), Polls: polls() - pollsBefore, CallsPerHour: map[string]float64{},
		RequestsPerHour: float64(after.Requests-before.Requests) * perHour}
	for method, n := range after.Calls {
		if d := n - before.Calls[method]; d > 0 {
			w.CallsPerHour[method] = float64(d) * perHour
			w.CUPerHour += float64(d) * perHour * weights.Of(method)
		}
	}
	return w, nil
}

// stillSummary is the still head's figures as text.
func stillSummary(s *Still) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\na still head, POLL_INTERVAL=%s, the defaults; load average at start %s:\n", time.Duration(s.PollIntervalS*float64(time.Second)), s.Load)
	for _, w := range []struct {
		name string
		w    *StillWindow
	}{{"cursor below the head", s.Behind}, {"cursor at the head", s.AtHead}} {
		var calls []string
		for _, m := range slices.Sorted(maps.Keys(w.w.CallsPerHour)) {
			calls = append(calls, fmt.Sprintf("%s %.0f", m, w.w.CallsPerHour[m]))
		}
		fmt.Fprintf(&b, "  %-22s %.0f s, %.0f polls: %.0f CU an hour; calls an hour: %s\n", w.name, w.w.Seconds, w.w.Polls, w.w.CUPerHour, strings.Join(calls, ", "))
	}
	fmt.Fprintf(&b, "  credited %.1f s after the node finalized past the held head\n", s.CreditSeconds)
	return b.String()
}
