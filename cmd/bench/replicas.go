package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/internal/harness"
)

// replica is a running poller process and the address of its /metrics.
type replica struct {
	*harness.Proc
	addr string
}

// startPoller starts the poller binary bin with args and env (through
// internal/harness, as the integration tests do), its output in
// logDir/name.log; addr is where env has it serve /metrics.
func startPoller(bin string, args, env []string, logDir, name, addr string) (*replica, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	// The child writes to its own copy of the descriptor.
	defer f.Close()
	p, err := harness.Start(harness.Spec{Name: name, Bin: bin, Args: args, Env: env, Stdout: f, Stderr: f})
	if err != nil {
		return nil, err
	}
	return &replica{Proc: p, addr: addr}, nil
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
	env := harness.PollerEnv(harness.Target{
		DatabaseURL: dbURL, RPCURL: rpcURL, ChainID: b.info.ChainID, Contract: contract, HTTPAddr: addr.String(),
	}, slices.Concat(extra, b.extraEnv)...)
	return startPoller(bin, []string{"run"}, env, logDir, name, addr.String())
}

// replicaSet is the replicas of one run.
type replicaSet []*replica

// startReplicas starts n replicas as startReplica does, named name-0,
// name-1, …; if one fails to start, those started are stopped.
func (b *bench) startReplicas(n int, dbURL, logDir, name string, extra ...string) (replicaSet, error) {
	var rs replicaSet
	for i := range n {
		r, err := b.startReplica(dbURL, logDir, fmt.Sprintf("%s-%d", name, i), extra...)
		if err != nil {
			rs.stop()
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// stop stops every replica, all at once.
func (rs replicaSet) stop() {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.stop)
	}
	wg.Wait()
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

// metric sums the samples of a metric whose line starts with prefix; 0 if
// the replica does not answer.
func metric(ctx context.Context, addr, prefix string) float64 {
	v, err := harness.ScrapeSum(ctx, addr, prefix)
	if err != nil {
		return 0
	}
	return v
}

// rpcCalls sums burnpoller_rpc_requests_total over replicas by method,
// every method and result.
func rpcCalls(ctx context.Context, replicas []*replica) (map[string]float64, error) {
	return sumBy(ctx, replicas, "burnpoller_rpc_requests_total")
}

// sumBy sums metric over replicas by its method label.
func sumBy(ctx context.Context, replicas []*replica, metric string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, r := range replicas {
		m, err := harness.ScrapeBy(ctx, r.addr, metric, "method")
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out, nil
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

// allPolled says every replica has polled (see polled).
func allPolled(ctx context.Context, replicas []*replica) bool {
	for _, r := range replicas {
		if !polled(ctx, r) {
			return false
		}
	}
	return true
}

// answers200 says whether url answers a GET with 200 within a second: a
// replica's /readyz, Ponder's /ready.
func answers200(ctx context.Context, url string) bool {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
