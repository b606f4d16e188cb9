package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// A live chain: a real node sealing blocks on its own clock, as users'
// chains do, a burn contract deployed on it and burns trickling in (the
// cost and upgrade phases).

// liveChain is a node sealing on its own clock, the seeder that owns its
// nonces, and a burn contract deployed.
type liveChain struct {
	n         *realNode
	s         *seeder
	contracts burnContracts
	// final is the node's finalized block once the contracts are in.
	final uint64
}

// startLiveChain starts a node of kind from bin as o says (o.blockTime
// set); on anvil it first mines history blocks for the finalized block
// (head less two epochs) to stand on. The caller closes l.n.
func startLiveChain(ctx context.Context, kind, bin string, o nodeOptions, history uint64) (_ *liveChain, err error) {
	l := &liveChain{}
	if l.n, err = startNode(ctx, kind, bin, o); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.n.close()
		}
	}()
	if kind == nodeAnvil && history > 0 {
		if err := l.n.rpc.CallContext(ctx, nil, "anvil_mine", hexutil.Uint64(history)); err != nil {
			return nil, err
		}
	}
	if l.s, err = newSeeder(ctx, l.n); err != nil {
		return nil, err
	}
	if l.contracts, err = l.s.deployBurner(ctx); err != nil {
		return nil, err
	}
	if l.final, err = finalized(ctx, l.n.url); err != nil {
		return nil, err
	}
	return l, nil
}

// sendBurn sends one burn through contracts with the next nonce, for the
// node to seal on its own clock, and returns its hash.
func (s *seeder) sendBurn(ctx context.Context, contracts burnContracts) (common.Hash, error) {
	tx, err := s.burnTx(contracts.batch, 1)
	if err != nil {
		return common.Hash{}, err
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		return common.Hash{}, err
	}
	return tx.Hash(), s.n.rpc.CallContext(ctx, nil, "eth_sendRawTransaction", hexutil.Bytes(raw))
}

// trickle is burns sent one at a time on a live chain, which seals them on
// its own clock.
type trickle struct {
	// sent counts the burns sent; first receives the first one's hash.
	sent  atomic.Int64
	first chan common.Hash
	// stop stops the sending and waits until it has stopped.
	stop func()
}

// trickle sends a burn through contracts every every until stop; a send
// that fails is logged and the next one tried.
func (s *seeder) trickle(ctx context.Context, contracts burnContracts, every time.Duration, log *slog.Logger) *trickle {
	ctx, cancel := context.WithCancel(ctx)
	t := &trickle{first: make(chan common.Hash, 1)}
	var wg sync.WaitGroup
	wg.Go(func() {
		each(ctx, every, func() {
			tx, err := s.sendBurn(ctx, contracts)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("sending a burn", slog.Any("err", err))
				}
				return
			}
			if t.sent.Add(1) == 1 {
				t.first <- tx
			}
		})
	})
	t.stop = func() { cancel(); wg.Wait() }
	return t
}

// each calls f every d until ctx ends.
func each(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
