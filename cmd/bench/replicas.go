package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// replica is a running `poller run` and the address of its /metrics.
type replica struct {
	*harness.Proc
	addr string
}

// startReplica starts `poller run` on the database dbURL with the
// environment pollerEnv gives for extra (the bench's node and burn
// contract), its output in logDir/name.log.
func (b *bench) startReplica(dbURL, logDir, name string, extra ...string) (*replica, error) {
	return b.startReplicaOn(b.info.RPCURL, b.info.BurnContract, dbURL, logDir, name, extra...)
}

// startReplicaOn is startReplica for the node at rpcURL and contract.
func (b *bench) startReplicaOn(rpcURL string, contract common.Address, dbURL, logDir, name string, extra ...string) (*replica, error) {
	return b.startBinary(b.bin, rpcURL, contract, dbURL, logDir, name, extra...)
}

// startBinary is startReplicaOn running the poller binary bin.
func (b *bench) startBinary(bin, rpcURL string, contract common.Address, dbURL, logDir, name string, extra ...string) (*replica, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	// The child writes to its own copy of the descriptor.
	defer f.Close()
	p, err := harness.Start(harness.Spec{
		Name: name, Bin: bin, Args: []string{"run"},
		Env: harness.PollerEnv(harness.Target{
			DatabaseURL: dbURL, RPCURL: rpcURL, ChainID: b.info.ChainID, Contract: contract, HTTPAddr: addr.String(),
		}, slices.Concat(extra, b.extraEnv)...),
		Stdout: f, Stderr: f,
	})
	if err != nil {
		return nil, err
	}
	return &replica{Proc: p, addr: addr.String()}, nil
}

// stop sends SIGTERM and, after 20 s, SIGKILL.
func (r *replica) stop() { _, _ = r.Stop(20 * time.Second) }

// pollerEnv is a poller's environment: pointed at dbURL and the dev chain,
// every setting at its default but extra, then -poller-env.
func (b *bench) pollerEnv(dbURL, httpAddr string, extra ...string) []string {
	return harness.PollerEnv(harness.Target{
		DatabaseURL: dbURL, RPCURL: b.info.RPCURL, ChainID: b.info.ChainID, Contract: b.info.BurnContract, HTTPAddr: httpAddr,
	}, slices.Concat(extra, b.extraEnv)...)
}

// peakRSSMiB is p's peak resident memory in MiB, -1 if it cannot be read.
func peakRSSMiB(p *harness.Proc) int64 {
	n, err := p.PeakRSS()
	if err != nil {
		return -1
	}
	return n >> 20
}

// metric sums the samples of a metric whose line starts with prefix; 0 if
// the replica does not answer.
func metric(ctx context.Context, addr, prefix string) float64 {
	v, err := harness.ScrapeSum(ctx, addr, prefix)
	if err != nil {
		return 0
	}
	return v
}

// lockHolder is the replica whose burnpoller_lock_held is 1, or nil.
func lockHolder(ctx context.Context, replicas []*replica) *replica {
	for _, r := range replicas {
		if metric(ctx, r.addr, "burnpoller_lock_held") == 1 {
			return r
		}
	}
	return nil
}

// polled says replica r has completed a poll (committed or idle, the lock
// holder) or found the lock held (a standby): its start-up calls are
// behind.
func polled(ctx context.Context, r *replica) bool {
	done := 0.0
	for _, result := range []string{"committed", "idle", "standby"} {
		done += metric(ctx, r.addr, `burnpoller_polls_total{result="`+result+`"}`)
	}
	return done >= 1
}
