package chain_test

import (
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/chain"
)

func TestKnownChainRequired(t *testing.T) {
	required := []struct {
		id   uint64
		name string
	}{
		{1, "Ethereum mainnet"},
		{11155111, "Sepolia"},
		{17000, "Holesky"},
		{560048, "Hoodi"},
		{10, "OP Mainnet"},
		{8453, "Base"},
		{42161, "Arbitrum One"},
		{137, "Polygon PoS"},
		{56, "BNB Smart Chain"},
		{43114, "Avalanche C-Chain"},
		{100, "Gnosis"},
		{59144, "Linea"},
		{534352, "Scroll"},
		{324, "ZKsync Era"},
	}
	for _, tc := range required {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := chain.KnownChain(tc.id)
			if !ok {
				t.Fatalf("KnownChain(%d) = false, want the %s defaults", tc.id, tc.name)
			}
			if d.Name != tc.name {
				t.Errorf("KnownChain(%d).Name = %q, want %q", tc.id, d.Name, tc.name)
			}
		})
	}
}

func TestKnownChainEntries(t *testing.T) {
	for _, e := range chain.KnownChains() {
		t.Run(e.Name, func(t *testing.T) {
			if e.Name == "" {
				t.Errorf("chain %d: empty Name", e.ID)
			}
			switch e.Finality {
			case chain.FinalityFinalized, chain.FinalitySafe:
				if e.Confirmations != 0 {
					t.Errorf("chain %d: Finality %q with Confirmations %d, want 0", e.ID, e.Finality, e.Confirmations)
				}
			case chain.FinalityLatest:
				if e.Confirmations == 0 {
					t.Errorf("chain %d: FinalityLatest with 0 confirmations credits unconfirmed blocks", e.ID)
				}
			default:
				t.Errorf("chain %d: Finality %q is not finalized, safe or latest", e.ID, e.Finality)
			}
			if e.MaxBlockRange < 100 || e.MaxBlockRange > 100_000 {
				t.Errorf("chain %d: MaxBlockRange %d not in [100, 100000]", e.ID, e.MaxBlockRange)
			}
			if strings.TrimSpace(e.Reason) == "" {
				t.Errorf("chain %d: empty Reason", e.ID)
			}
			if strings.ContainsAny(e.Reason, "\r\n") {
				t.Errorf("chain %d: Reason is not one line: %q", e.ID, e.Reason)
			}
			d, ok := chain.KnownChain(e.ID)
			if !ok || d != e.Defaults {
				t.Errorf("KnownChain(%d) = %+v, %v; KnownChains has %+v", e.ID, d, ok, e.Defaults)
			}
		})
	}
}

func TestKnownChainUnknown(t *testing.T) {
	for _, id := range []uint64{0, 1337, 31337, 5, 80001, 1<<64 - 1} {
		if d, ok := chain.KnownChain(id); ok {
			t.Errorf("KnownChain(%d) = %+v, true; want false", id, d)
		}
	}
}

func TestKnownChainsSorted(t *testing.T) {
	all := chain.KnownChains()
	if len(all) == 0 {
		t.Fatal("KnownChains is empty")
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].ID >= all[i].ID {
			t.Errorf("KnownChains not strictly ascending at %d: %d then %d", i, all[i-1].ID, all[i].ID)
		}
	}
	// The result is a copy: changing it leaves the table alone.
	all[0].MaxBlockRange = 0
	if d, _ := chain.KnownChain(all[0].ID); d.MaxBlockRange == 0 {
		t.Error("changing KnownChains' result changed the table")
	}
}
