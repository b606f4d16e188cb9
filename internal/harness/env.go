package harness

import (
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// Target is what a poller replica is pointed at.
type Target struct {
	DatabaseURL string
	RPCURL      string
	ChainID     uint64
	Contract    common.Address
	// HTTPAddr is where the replica serves its probes and /metrics; empty
	// leaves the poller's default.
	HTTPAddr string
}

// PollerEnv is the environment of a poller pointed at t, logging JSON, with
// every other setting at the poller's default unless settings (K=V, in
// order) change it. A later K=V overrides an earlier one with the same key.
func PollerEnv(t Target, settings ...string) []string {
	env := []string{
		"DATABASE_URL=" + t.DatabaseURL,
		"RPC_URL=" + t.RPCURL,
		"CHAIN_ID=" + strconv.FormatUint(t.ChainID, 10),
		"BURN_CONTRACT=" + t.Contract.Hex(),
	}
	if t.HTTPAddr != "" {
		env = append(env, "HTTP_ADDR="+t.HTTPAddr)
	}
	return append(append(env, "LOG_FORMAT=json"), settings...)
}

// TestSettings are the settings the integration tests run replicas with:
// short intervals, timeouts and ranges, so that a test sees many
// transactions, hand-overs and retries within seconds. The slice is a fresh
// copy on each call.
func TestSettings() []string {
	return []string{
		"POLL_INTERVAL=200ms",
		"MAX_BLOCK_RANGE=16",
		"LOCK_WAIT=500ms",
		"TX_TIMEOUT=5s",
		"RPC_TIMEOUT=3s",
		"SHUTDOWN_TIMEOUT=5s",
		"LOG_LEVEL=info",
	}
}

// Group is one group of a poller serving several (GROUPS): its name and
// what it is pointed at.
type Group struct {
	Name     string
	RPCURL   string
	ChainID  uint64
	Contract common.Address
}

// GroupsEnv is the environment of a poller serving groups on databaseURL
// (GROUPS, each group's RPC_URL, CHAIN_ID and BURN_CONTRACT under its
// prefix), serving its probes on httpAddr unless empty, logging JSON, with
// every other setting at the poller's default unless settings (K=V, in
// order; unprefixed ones serve every group) change it.
func GroupsEnv(databaseURL, httpAddr string, groups []Group, settings ...string) []string {
	env := []string{"DATABASE_URL=" + databaseURL}
	var names []string
	for _, g := range groups {
		p := strings.ToUpper(g.Name) + "_"
		names = append(names, g.Name)
		env = append(env, p+"RPC_URL="+g.RPCURL, p+"CHAIN_ID="+strconv.FormatUint(g.ChainID, 10), p+"BURN_CONTRACT="+g.Contract.Hex())
	}
	env = append(env, "GROUPS="+strings.Join(names, ","))
	if httpAddr != "" {
		env = append(env, "HTTP_ADDR="+httpAddr)
	}
	return append(append(env, "LOG_FORMAT=json"), settings...)
}
