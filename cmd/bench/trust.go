package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// trustPhases times one replica's catch-up with the receipts check off, and
// with RPC_QUORUM=2 over two endpoint entries for the same node (so the
// figure is the cost of reading every range twice and comparing, not of a
// second node's speed), against the default run (receipts on, no quorum).
func (b *bench) trustPhases(ctx context.Context, target uint64, o options, res *Results) error {
	second := strings.Replace(b.info.RPCURL, "127.0.0.1", "localhost", 1)
	if second == b.info.RPCURL {
		return fmt.Errorf("cannot name the node %s a second way", b.info.RPCURL)
	}
	base := res.CatchUp1
	res.Trust = append(res.Trust, TrustRun{Setting: "default: VERIFY_RECEIPTS=true, RPC_QUORUM=1", CatchUp: base, RatioToDefault: 1})
	for _, v := range []struct {
		name string
		env  []string
	}{
		{"VERIFY_RECEIPTS=false", []string{"VERIFY_RECEIPTS=false"}},
		{"RPC_QUORUM=2 (receipts on)", []string{"RPC_QUORUM=2", "RPC_URL=" + b.info.RPCURL + "," + second}},
		{"RPC_QUORUM=2, VERIFY_RECEIPTS=false", []string{"RPC_QUORUM=2", "VERIFY_RECEIPTS=false", "RPC_URL=" + b.info.RPCURL + "," + second}},
	} {
		cu, err := b.fullCatchUp(ctx, target, 1, o.burns, "catch-up with "+v.name, v.env...)
		if err != nil {
			return err
		}
		run := TrustRun{Setting: v.name, CatchUp: cu}
		if base.BurnsPerSec > 0 {
			run.RatioToDefault = cu.BurnsPerSec / base.BurnsPerSec
		}
		res.Trust = append(res.Trust, run)
		b.log.Info("trust checks", slog.String("setting", v.name), slog.Float64("burns_per_second", cu.BurnsPerSec),
			slog.Float64("rpc_calls", cu.RPCCalls), slog.Float64("receipt_calls", cu.ReceiptCalls))
	}
	return nil
}
