// Defaults for well-known EVM chains, used when FINALITY, CONFIRMATIONS or
// MAX_BLOCK_RANGE is unset.
//
// How these compare with other indexers, and why they differ. Chainlink
// (smartcontractkit/chainlink ccip/config/evm/*.toml) also follows the
// node's finalized tag wherever it trusts it: FinalityTagEnabled on
// Ethereum, Sepolia, Optimism, Base, Arbitrum, Scroll, Polygon (which keeps
// FinalityDepth=500 as a fallback) and Avalanche (FinalityDepth=1); BSC
// uses the tag with FinalizedBlockOffset=2 (an older file: depth 50). It
// uses a depth where we wait for an L1 proof: Linea FinalityDepth=600 (~20
// min), ZKsync FinalityDepth=1200 (~20 min, "l1_committed"), Gnosis the
// fallback 50 (fallback.toml, with LogBackfillBatchSize=1000). Ponder
// (ponder-sh/ponder packages/core/src/utils/finality.ts) used fixed counts,
// 65 blocks for Ethereum and testnets, 200 for Polygon, 240 for Arbitrum and
// 30 for everything else; it now uses a per-chain time window (default
// DEFAULT_MAX_REORG_SECONDS = 60). rindexer (joshstevens19/rindexer
// core/src/indexer/reorg/mod.rs, reorg_safe_distance_for_chain) stays 20
// blocks behind on Ethereum, 200 on Polygon, 24 on Arbitrum, OP, Base, BSC
// and Gnosis, 12 on Avalanche, and 64 elsewhere.
//
// Ponder and rindexer index data for dashboards and roll rows back when a
// reorg arrives; a depth that is usually enough suits them. We credit money,
// and a credit cannot be rolled back once it is spent, so we wait for the
// chain's own finality signal. On rollups a block count is not that signal:
// 24 Arbitrum blocks is about 6 s, before the batch is even on L1 (Arbitrum's
// finality-and-reorgs page says to gate crediting on `finalized`). Where the
// tag means L1 proof (Linea, Scroll, ZKsync), we accept hours of latency
// rather than trust the sequencer. MaxBlockRange is only a starting ceiling,
// since the poller shrinks it to what each provider accepts.

package chain

import (
	"cmp"
	"slices"
)

// Defaults are the settings burnpoller uses for a well-known chain when the user sets none.
type Defaults struct {
	Name          string   // e.g. "Ethereum mainnet"
	Finality      Finality // FinalityFinalized, FinalitySafe or FinalityLatest
	Confirmations uint64   // used with FinalityLatest; 0 otherwise
	MaxBlockRange uint64   // most blocks per eth_getLogs call; a starting ceiling the poller shrinks at runtime
	Reason        string   // one line: why these values
}

// KnownChainEntry is one row of the table KnownChains returns.
type KnownChainEntry struct {
	ID uint64
	Defaults
}

// knownChains is keyed by chain id; a duplicate id does not compile.
//
// Ranges aim at a few hours of chain per call within the 10,000-block cap
// common among hosted providers: 2,000 on 12-second chains (Chainstack's
// recommendation, Ponder's old default), 5,000 to 10,000 on fast chains,
// 2,048 on Avalanche for its public API node.
var knownChains = map[uint64]Defaults{
	1: {"Ethereum mainnet", FinalityFinalized, 0, 2000,
		"beacon-chain finality (2 epochs, ~13 min); 'finalized' tag served by all clients"},
	10: {"OP Mainnet", FinalityFinalized, 0, 10000,
		"OP Stack: 'finalized' = L2 block derived from finalized L1 data (~20-30 min); unsafe/safe heads can reorg"},
	56: {"BNB Smart Chain", FinalityFinalized, 0, 5000,
		"fast finality (BEP-126): block n final by n+2, seconds; 'finalized' stalls rather than lies if votes are missing"},
	100: {"Gnosis", FinalityFinalized, 0, 5000,
		"Gnosis beacon chain (5 s slots, 16-slot epochs): finality ~2.7 min; 'finalized' served by all clients"},
	137: {"Polygon PoS", FinalityFinalized, 0, 5000,
		"Heimdall milestones (PIP-11) give deterministic finality seconds behind head; replaces 200+ block depths for reorgs"},
	324: {"ZKsync Era", FinalityFinalized, 0, 5000,
		"'finalized' = batch proven and executed on L1 (~3 h incl. execution delay); L2 soft confirmations are trust in the sequencer"},
	8453: {"Base", FinalityFinalized, 0, 10000,
		"OP Stack: 'finalized' = L2 block derived from finalized L1 data (~20-30 min); unsafe/safe heads can reorg"},
	17000: {"Holesky", FinalityFinalized, 0, 2000,
		"Ethereum testnet with beacon-chain finality (~13 min); 'finalized' tag served by all clients"},
	42161: {"Arbitrum One", FinalityFinalized, 0, 10000,
		"Nitro: 'finalized' = L2 block whose batch is in a finalized L1 block (~15-30 min); Arbitrum docs say credit on it"},
	43114: {"Avalanche C-Chain", FinalityFinalized, 0, 2048,
		"Snowman consensus: blocks final on acceptance (~1-2 s); 'finalized' = last accepted block; public API caps getLogs"},
	59144: {"Linea", FinalityFinalized, 0, 5000,
		"'finalized' = ZK proof verified on L1 and L1-finalized (median <2 h, up to 16 h); sequencer-only until then"},
	534352: {"Scroll", FinalityFinalized, 0, 5000,
		"'finalized' = batch proven and finalized on L1 (~1 h); node must run --rollup.verify to serve the tag"},
	560048: {"Hoodi", FinalityFinalized, 0, 2000,
		"Ethereum testnet with beacon-chain finality (~13 min); 'finalized' tag served by all clients"},
	11155111: {"Sepolia", FinalityFinalized, 0, 2000,
		"Ethereum testnet with beacon-chain finality (~13 min); 'finalized' tag served by all clients"},
}

// KnownChain returns the defaults for chain id, and false for a chain not in the table.
func KnownChain(id uint64) (Defaults, bool) {
	d, ok := knownChains[id]
	return d, ok
}

// KnownChains returns the table ordered by chain id (for docs and `poller config`).
func KnownChains() []KnownChainEntry {
	out := make([]KnownChainEntry, 0, len(knownChains))
	for id, d := range knownChains {
		out = append(out, KnownChainEntry{ID: id, Defaults: d})
	}
	slices.SortFunc(out, func(a, b KnownChainEntry) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
