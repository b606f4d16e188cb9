package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// summary is a short text of the real-node runs' figures and the goals'
// ratios (-summary): what make bench-quick prints.
func summary(res *Results) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s\n", res.Machine)
	for _, d := range res.Dense {
		fmt.Fprintf(&b, "\nnode %s, %s shape: %d burns in %d blocks (min / median / max a block: %d / %d / %d; transactions of %d), finalized block %d; load average at start %s\n",
			d.Node, d.Shape, d.Seed.Burns, d.Seed.BurnBlocks, d.Seed.MinPerBlock, d.Seed.MedianBlock, d.Seed.MaxPerBlock, d.Seed.PerTx, d.Seed.Finalized, d.MachineLoadAtStart)
		fmt.Fprintf(&b, "  %-56s %8s\n", "", "burns/s")
		row := func(name string, v float64) { fmt.Fprintf(&b, "  %-56s %8.0f\n", name, v) }
		row("raw eth_getLogs (plain HTTP)", d.RawLogs.PerSec)
		row(fmt.Sprintf("raw eth_getBlockReceipts (%d a request, %d at once)", bestProbe(d).Batch, bestProbe(d).Parallel), d.RawReceipts.PerSec)
		row("COPY payments", d.CopyPayments.PerSec)
		row("COPY events", d.CopyEvents.PerSec)
		row("same-work ceiling", d.SameWork)
		row("receipts-off ceiling: min(raw logs, COPY payments + events)", d.ReceiptsOffCeiling)
		row("burnpoller, default", d.Default.BurnsPerSec)
		row("burnpoller, VERIFY_RECEIPTS=false", d.ReceiptsOff.BurnsPerSec)
		if d.Ponder != nil {
			row("Ponder "+d.Ponder.Version+", steady after its first row", d.Ponder.SteadyPerSec)
		}
		fmt.Fprintf(&b, "  default ÷ same-work ceiling           %.2f  (goal ≥ 0.70)\n", d.DefaultToSameWork)
		fmt.Fprintf(&b, "  receipts off ÷ its ceiling            %.2f  (goal ≥ 0.70)\n", d.ReceiptsOffToCeiling)
		if d.Ponder != nil {
			fmt.Fprintf(&b, "  default ÷ Ponder                      %.2f  (goal ≥ 1.5)\n", d.DefaultToPonder)
		}
		fmt.Fprintf(&b, "  peak RSS, default / receipts off      %d / %d MiB  (goal ≤ 64)\n", d.Default.PeakRSSMiB["replica-0"], d.ReceiptsOff.PeakRSSMiB["replica-0"])
		if r := d.DefaultReplicas; r != nil {
			fmt.Fprintf(&b, "  %d replicas, default: %.0f burns/s, peak RSS %v MiB  (goal ≤ 64 each)\n", r.Replicas, r.BurnsPerSec, r.PeakRSSMiB)
		}
		fmt.Fprintf(&b, "  first commit after start (default)    %.2f s\n", d.Default.FirstCommitSecs)
		fmt.Fprintf(&b, "  CPU seconds, default:      %s\n", cpuLine(d.Default.CPUSeconds))
		fmt.Fprintf(&b, "  CPU seconds, receipts off: %s\n", cpuLine(d.ReceiptsOff.CPUSeconds))
		fmt.Fprintf(&b, "  calls, default:      %s\n", calls(d.Default.CallsByMethod))
		fmt.Fprintf(&b, "  calls, receipts off: %s\n", calls(d.ReceiptsOff.CallsByMethod))
	}
	b.WriteString(costSummary(res.Cost))
	b.WriteString(stillSummary(res.Still))
	if g := res.Groups; g != nil {
		fmt.Fprintf(&b, "\nmany groups on node %s, %d burns each, one database; load average at start %s:\n", g.Node, g.BurnsPerGroup, g.LoadAtStart)
		for _, lat := range []int64{0, 1} {
			var alone []float64
			for _, a := range g.Alone {
				if (a.LatencyMs > 0) == (lat == 1) {
					alone = append(alone, a.Seconds[0])
				}
			}
			if len(alone) > 0 {
				fmt.Fprintf(&b, "  each alone, %s: seconds %v\n", map[int64]string{0: "straight to the node", 1: "through the latency proxy"}[lat], rounded(alone))
			}
		}
		for _, r := range g.Runs {
			fmt.Fprintf(&b, "  latency %3d ms, %d groups: seconds %v, ÷ alone %v (max %.2f), %.0f burns/s in all; CPU s: pollers %.2f, node %.2f, postgres %.2f, bench with its proxies %.2f\n",
				r.LatencyMs, r.Groups, rounded(r.Seconds), rounded(r.ToAlone), r.MaxToAlone, r.BurnsPerSec,
				r.CPUSeconds["pollers"], r.CPUSeconds["node"], r.CPUSeconds["postgres_backends"], r.CPUSeconds["bench"])
		}
	}
	return b.String()
}

// bestProbe is the receipts probe that set the ceiling.
func bestProbe(d *Dense) ReceiptsProbe {
	var best ReceiptsProbe
	for _, p := range d.ReceiptsProbes {
		if p.Rate.PerSec > best.Rate.PerSec {
			best = p
		}
	}
	return best
}

// calls prints calls by method, most first.
func calls(m map[string]float64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// rounded keeps two decimals.
func rounded(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*100+0.5)) / 100
	}
	return out
}

// cpuLine prints CPU seconds by part.
func cpuLine(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
