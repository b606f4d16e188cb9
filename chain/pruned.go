package chain

import (
	"errors"
	"strings"
)

// ErrHistoryPruned marks a reply meaning the endpoint does not serve the blocks asked for any more (EIP-4444 history expiry, a pruned node).
var ErrHistoryPruned = errors.New("history not served by this endpoint")

// codeHistoryPruned is the JSON-RPC error code execution-apis gives pruned
// history (EIP-4444): go-ethereum's history.PrunedHistoryError, reth's
// EthApiError::PrunedHistoryUnavailable, Nethermind's
// ErrorCodes.PrunedHistoryUnavailable and Besu's PRUNED_HISTORY_UNAVAILABLE
// all send it.
const codeHistoryPruned = 4444

// prunedPhrases are lower-case fragments of replies that mean the node no
// longer holds the blocks, receipts or logs asked for, which an archive
// endpoint would still serve. Each is specific to history: "header not
// found", "block not found" or "unknown block" alone may be a block not yet
// produced, and "missing trie node" is pruned state, not pruned history.
var prunedPhrases = []string{
	// go-ethereum core/history (PrunedHistoryError), reth, Nethermind, Besu.
	"pruned history unavailable",
	// Erigon 2.x checkPruneHistory; passed on by providers such as
	// Allnodes and PublicNode.
	"history has been pruned",
	// Erigon 3 state.PrunedError, returned by eth_getLogs below the prune
	// point ("...: requested block N, history is available from block M").
	"old data not available due to pruning",
	// reth ProviderError::BlockExpired, when it is not turned into 4444.
	"history has expired",
}

// isHistoryPruned reports whether a JSON-RPC error (code, message, data) means the node pruned the history asked for.
func isHistoryPruned(code int, message string, data any) bool {
	if code == codeHistoryPruned {
		return true
	}
	if prunedText(message) {
		return true
	}
	s, _ := data.(string)
	return prunedText(s)
}

// prunedText reports whether an error text names pruned history.
func prunedText(s string) bool {
	if s == "" {
		return false
	}
	msg := strings.ToLower(s)
	switch {
	case containsAny(msg, prunedPhrases...):
		return true
	case strings.Contains(msg, "receipt not available for") && strings.Contains(msg, "block"):
		// Nethermind LogFinder, before eth_getLogs mapped it to 4444:
		// "Receipt not available for From block N."
		return true
	case strings.Contains(msg, "data before txnum=") && strings.Contains(msg, "is not available"):
		// Erigon 3 eth_getLogs below the history start, before it used
		// state.PrunedError: "seek with txNum=A but data before txNum=B
		// is not available".
		return true
	}
	return false
}
