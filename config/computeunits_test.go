package config

import (
	"maps"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/chain"
)

// TestComputeUnits: RPC_COMPUTE_UNITS is the default table unless set; a
// set value replaces it whole; a malformed pair is one problem naming the
// variable, and, with GROUPS, the group's prefixed variable.
func TestComputeUnits(t *testing.T) {
	setEnv(t, validEnv)
	set, problems := Load(ScopeRun)
	w, err := set.ComputeUnits()
	if len(problems) > 0 || err != nil || !maps.Equal(w, chain.DefaultWeights()) {
		t.Fatalf("default: %v, %v, %v; want the default table", w, problems, err)
	}
	setEnv(t, with(map[string]string{"RPC_COMPUTE_UNITS": " eth_getLogs=60, eth_getBlockReceipts=150 "}))
	set, problems = Load(ScopeRun)
	w, err = set.ComputeUnits()
	if want := (chain.Weights{"eth_getLogs": 60, "eth_getBlockReceipts": 150}); len(problems) > 0 || err != nil || !maps.Equal(w, want) {
		t.Fatalf("set: %v, %v, %v; want %v", w, problems, err, want)
	}
	for _, bad := range []string{"eth_getLogs", "eth_getLogs=x", "=5", "eth_getLogs=-1", "eth_getLogs=NaN"} {
		setEnv(t, with(map[string]string{"RPC_COMPUTE_UNITS": bad}))
		if _, problems := Load(ScopeRun); len(problems) != 1 || !strings.HasPrefix(problems[0], "RPC_COMPUTE_UNITS: ") {
			t.Errorf("RPC_COMPUTE_UNITS=%q: problems %q, want one naming it", bad, problems)
		}
	}
}
