package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"

	"github.com/burnpoller/burnpoller/devchain"
)

// Dense is a dense catch-up on a node running as its own process (geth
// --dev or anvil), seeded as users' chains look, against ceilings read on
// the same chain without burnpoller code.
type Dense struct {
	Node  string     `json:"node"`
	Shape string     `json:"shape"`
	Seed  *denseSeed `json:"seed"`
	// ClientLogs is the burns read with burnpoller's own client
	// (chain.Endpoints, default range, receipts off), decoded: how the rows
	// for the COPY ceilings are read. Not a ceiling.
	ClientLogs Rate `json:"client_logs"`
	// RawLogs is eth_getLogs over the whole range in as few calls as the
	// node accepts, plain HTTP, undecoded.
	RawLogs Rate `json:"raw_logs"`
	// RawReceipts is the best of ReceiptsProbes: eth_getBlockReceipts of
	// every block holding a burn, plain HTTP, undecoded.
	RawReceipts    Rate            `json:"raw_receipts"`
	ReceiptsProbes []ReceiptsProbe `json:"receipts_probes"`
	// CopyPayments and CopyEvents are COPY of the payments, and of one
	// confirmed event per payment, into a migrated database.
	CopyPayments Rate `json:"copy_payments"`
	CopyEvents   Rate `json:"copy_events"`
	// SameWork is the ceiling of the default settings, which read every
	// burn's log and receipt and write its payment and event:
	// min(logs + receipts, COPY payments + events), each pair one after
	// the other (1 / (1/a + 1/b)).
	SameWork float64 `json:"same_work_ceiling"`
	// ReceiptsOffCeiling is min(raw logs, COPY of payments and their
	// events): the work of VERIFY_RECEIPTS=false, whose every payment is
	// written with its event.
	ReceiptsOffCeiling float64 `json:"receipts_off_ceiling"`
	Default            CatchUp `json:"catch_up_default"`
	ReceiptsOff        CatchUp `json:"catch_up_verify_receipts_false"`
	// DefaultReplicas is the default catch-up with -dense-replicas
	// replicas: one works, the others wait on the writers' lock.
	DefaultReplicas *CatchUp `json:"catch_up_default_replicas,omitempty"`
	Ponder          *Ponder  `json:"ponder,omitempty"`
	// The goals' ratios.
	DefaultToSameWork     float64 `json:"default_to_same_work"`
	DefaultToPonder       float64 `json:"default_to_ponder,omitempty"`
	ReceiptsOffToCeiling  float64 `json:"receipts_off_to_ceiling"`
	NodePeakRSSMiB        int64   `json:"node_peak_rss_mib"`
	PollerSettings        string  `json:"poller_settings"`
	MachineLoadAtStart    string  `json:"load_average_at_start"`
	ReceiptsOffToDefault  float64 `json:"receipts_off_to_default"`
	DefaultFirstCommitSec float64 `json:"default_first_commit_seconds"`
}

// denseRuns runs the dense workload on each node of -dense-node, in each
// shape of -shape.
func (b *bench) denseRuns(ctx context.Context, o options, res *Results) error {
	for _, kind := range strings.Split(o.denseNodes, ",") {
		if kind == nodeSim {
			return errors.New("-dense-node: sim runs alone, with every other phase")
		}
		for _, shape := range strings.Split(o.shapes, ",") {
			if shape != shapeEven && shape != shapeUneven {
				return fmt.Errorf("-shape %q: want %s or %s", shape, shapeEven, shapeUneven)
			}
			d, err := b.densePhase(ctx, o, kind, shape)
			if err != nil {
				return fmt.Errorf("dense run on %s, %s shape: %w", kind, shape, err)
			}
			res.Dense = append(res.Dense, d)
		}
	}
	return nil
}

// densePhase runs the dense workload on a fresh node of kind: seeds it,
// reads the ceilings, times one replica's catch-up with the defaults and
// with VERIFY_RECEIPTS=false, and Ponder's when -ponder names its project.
func (b *bench) densePhase(ctx context.Context, o options, kind, shape string) (*Dense, error) {
	bin := o.geth
	if kind == nodeAnvil {
		bin = o.anvil
	}
	d := &Dense{Node: kind, Shape: shape, PollerSettings: "defaults; POLL_INTERVAL=200ms", MachineLoadAtStart: loadAverage()}
	n, err := startNode(ctx, kind, bin, nodeOptions{memory: shape == shapeUneven})
	if err != nil {
		return nil, err
	}
	defer n.close()
	s, err := newSeeder(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("seeding %s: %w", kind, err)
	}
	c, err := s.deployBurner(ctx)
	if err != nil {
		return nil, fmt.Errorf("seeding %s: %w", kind, err)
	}
	b.log.Info("seeding", slog.String("node", kind), slog.String("shape", shape), slog.Int("burns", o.burns))
	if shape == shapeUneven {
		d.Seed, err = s.seedUneven(ctx, c, o.burns)
	} else {
		d.Seed, err = s.seedDense(ctx, []burnContracts{c}, o.burns, o.perTx, o.txsPerBlock)
	}
	if err != nil {
		return nil, fmt.Errorf("seeding %s: %w", kind, err)
	}
	target := d.Seed.Finalized
	b.log.Info("seeded", slog.String("node", kind), slog.String("shape", shape), slog.Uint64("head", d.Seed.Head), slog.Uint64("finalized", target),
		slog.Int("blocks_with_burns", d.Seed.BurnBlocks), slog.Float64("seconds", d.Seed.SeedSeconds))
	b.info = devchain.Info{RPCURL: n.url, ChainID: n.chainID, BurnContract: c.burn}
	b.node = n

	rows, _, clientRate, err := nodeCeiling(ctx, b.info, target)
	if err != nil {
		return nil, fmt.Errorf("reading the burns: %w", err)
	}
	if len(rows) != o.burns {
		return nil, fmt.Errorf("%s returned %d burns, %d were sent", kind, len(rows), o.burns)
	}
	d.ClientLogs = clientRate
	if d.RawLogs, err = rawNodeCeiling(ctx, n.url, c.burn, target); err != nil {
		return nil, fmt.Errorf("raw logs: %w", err)
	}
	if d.RawLogs.Items != o.burns {
		return nil, fmt.Errorf("raw eth_getLogs counted %d burns, %d were sent", d.RawLogs.Items, o.burns)
	}
	if d.RawReceipts, d.ReceiptsProbes, err = rawReceiptsCeiling(ctx, n.url, d.Seed.blockNumbers, o.burns); err != nil {
		return nil, err
	}
	if d.CopyPayments, d.CopyEvents, err = copyCeilings(ctx, o.database, rows); err != nil {
		return nil, fmt.Errorf("COPY: %w", err)
	}
	runtime.GC()
	d.SameWork = min(sequential(d.RawLogs.PerSec, d.RawReceipts.PerSec), sequential(d.CopyPayments.PerSec, d.CopyEvents.PerSec))
	d.ReceiptsOffCeiling = min(d.RawLogs.PerSec, sequential(d.CopyPayments.PerSec, d.CopyEvents.PerSec))
	b.log.Info("ceilings", slog.String("node", kind), slog.Float64("raw_logs", d.RawLogs.PerSec), slog.Float64("raw_receipts", d.RawReceipts.PerSec),
		slog.Float64("copy_payments", d.CopyPayments.PerSec), slog.Float64("copy_events", d.CopyEvents.PerSec),
		slog.Float64("same_work", d.SameWork))

	if d.Default, err = b.timedCatchUp(ctx, target, o.burns, "default"); err != nil {
		return nil, err
	}
	if d.ReceiptsOff, err = b.timedCatchUp(ctx, target, o.burns, "receipts-off", "VERIFY_RECEIPTS=false"); err != nil {
		return nil, err
	}
	if o.denseReplicas > 1 {
		cu, err := b.fullCatchUp(ctx, target, o.denseReplicas, o.burns, fmt.Sprintf("catch-up with %d replicas", o.denseReplicas))
		if err != nil {
			return nil, err
		}
		b.log.Info("catch-up", slog.Int("replicas", o.denseReplicas), slog.Float64("burns_per_second", cu.BurnsPerSec), slog.Any("rss_mib", cu.PeakRSSMiB))
		d.DefaultReplicas = &cu
	}
	d.DefaultToSameWork = d.Default.BurnsPerSec / d.SameWork
	d.ReceiptsOffToCeiling = d.ReceiptsOff.BurnsPerSec / d.ReceiptsOffCeiling
	d.ReceiptsOffToDefault = d.ReceiptsOff.BurnsPerSec / d.Default.BurnsPerSec
	d.DefaultFirstCommitSec = d.Default.FirstCommitSecs
	if o.ponder != "" {
		if d.Ponder, err = b.ponderRun(ctx, o, target, c.burn, o.burns); err != nil {
			return nil, fmt.Errorf("ponder: %w", err)
		}
		if d.Ponder.SteadyPerSec > 0 {
			d.DefaultToPonder = d.Default.BurnsPerSec / d.Ponder.SteadyPerSec
		}
	}
	d.NodePeakRSSMiB = n.peakRSSMiB()
	b.node = nil
	return d, nil
}

// sequential is the rate of doing the work of two rates one after the
// other: 1 / (1/a + 1/b).
func sequential(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return 1 / (1/a + 1/b)
}
