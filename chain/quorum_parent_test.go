package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/burnpoller/burnpoller/chain"
)

// forgeHeader answers as n does, except that block at's header carries a
// forged parent hash (parent) or a forged hash of its own (!parent), while
// everything else, its logs included, stays honest.
func forgeHeader(n *scriptedNode, at uint64, parent bool) handler {
	forged := common.HexToHash("0xf0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0")
	return func(m string, p []json.RawMessage) (any, error) {
		res, err := n.handle(m, p)
		var num hexutil.Uint64
		if m != "eth_getBlockByNumber" || err != nil || json.Unmarshal(p[0], &num) != nil || uint64(num) != at {
			return res, err
		}
		if parent {
			return header(at, hashOf(at), forged), nil
		}
		return header(at, forged, hashOf(at-1)), nil
	}
}

// TestQuorumComparesTheFirstBlocksParent: the serving endpoint forges the
// parent hash of a range's first block, and agrees with the other on
// everything else. The parent is what the writer checks against its cursor:
// taking it on one endpoint's word would latch a finality violation that
// quorum exists to prevent (or hide a real break). The answers differ, so
// no range comes back.
func TestQuorumComparesTheFirstBlocksParent(t *testing.T) {
	t.Parallel()
	a, b := oneBurnABlock(200, 100), oneBurnABlock(200, 100)
	e, obs, names := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, forgeHeader(a, 80, true)), serveNode(t, b.handle))
	ctx := context.Background()
	if _, err := e.Target(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.BurnRange(ctx, []common.Address{contract}, 80, 90)
	if !errors.Is(err, chain.ErrQuorumDisagreement) {
		t.Fatalf("BurnRange = %+v, %v; want ErrQuorumDisagreement", r.From, err)
	}
	if d := obs.disagreements(); !slices.Equal(d, names) {
		t.Fatalf("disagreements %v, want both endpoints %v (a tie)", d, names)
	}
}

// TestQuorumHeaders: with RPC_QUORUM>1 the canonical hashes a writer decides
// on (its ledger check, a cursor reset, a seeded cursor) need the quorum:
// one endpoint forging a block's hash is outvoted by two, and with only one
// other endpoint nothing comes back.
func TestQuorumHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("outvoted", func(t *testing.T) {
		t.Parallel()
		a, b, c := node(200, 100), node(200, 100), node(200, 100)
		e, obs, names := endpointsAt(t, chain.EndpointsConfig{Quorum: 2},
			serveNode(t, forgeHeader(a, 50, false)), serveNode(t, b.handle), serveNode(t, c.handle))
		hs, err := e.Headers(ctx, []uint64{49, 50, 51})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []uint64{49, 50, 51} {
			if hs[n].Hash != hashOf(n) {
				t.Fatalf("block %d: hash %s, want the quorum's %s", n, hs[n].Hash, hashOf(n))
			}
		}
		if d := obs.disagreements(); !slices.Equal(d, names[:1]) {
			t.Fatalf("disagreements %v, want the forger %v", d, names[:1])
		}
	})
	t.Run("no quorum", func(t *testing.T) {
		t.Parallel()
		a, b := node(200, 100), node(200, 100)
		e, _, _ := endpointsAt(t, chain.EndpointsConfig{Quorum: 2}, serveNode(t, forgeHeader(a, 50, false)), serveNode(t, b.handle))
		if hs, err := e.Headers(ctx, []uint64{50}); !errors.Is(err, chain.ErrQuorumDisagreement) {
			t.Fatalf("Headers = %v, %v; want ErrQuorumDisagreement", hs, err)
		}
	})
}
