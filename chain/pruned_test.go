package chain

import "testing"

// TestIsHistoryPruned checks isHistoryPruned against replies the clients
// send (code and message as each source writes them) and against replies
// that must not move a range to another endpoint.
func TestIsHistoryPruned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		code    int
		message string
		data    any
		want    bool
	}{
		// go-ethereum core/history/historymode.go: PrunedHistoryError, returned
		// by eth/filters (api.go, filter.go, filter_system.go) and
		// eth/api_backend.go below HistoryPruningCutoff.
		{"geth PrunedHistoryError", 4444, "pruned history unavailable", nil, true},
		// reth crates/rpc/rpc-eth-types/src/error/mod.rs:
		// EthApiError::PrunedHistoryUnavailable, rpc_error_with_code(4444, ...),
		// returned by crates/rpc/rpc/src/eth/filter.rs for eth_getLogs.
		{"reth PrunedHistoryUnavailable", 4444, "pruned history unavailable: requested 5, earliest available 100", nil, true},
		// reth crates/storage/errors/src/provider.rs: ProviderError::BlockExpired,
		// were it to reach the client as an internal error.
		{"reth BlockExpired", -32603, "block #5 is not available, history has expired (earliest available: #100)", nil, true},
		// Nethermind src/Nethermind/Nethermind.JsonRpc/ErrorCodes.cs
		// (PrunedHistoryUnavailable = 4444) and ErrorMessages.cs
		// ("Pruned history unavailable"); eth_getLogs sends
		// HaveNotSyncedReceiptsYet() as data.
		{"nethermind PrunedHistoryUnavailable", 4444, "Pruned history unavailable", false, true},
		// Nethermind src/Nethermind/Nethermind.Facade/Find/LogFinder.cs:
		// ResourceNotFoundException text, as message or as data.
		{"nethermind receipt not available", -32001, "Receipt not available for From block 100.", nil, true},
		{"nethermind receipt not available in data", -32001, "Resource not found", "Receipt not available for To block 200.", true},
		// Besu ethereum/api/.../jsonrpc/internal/response/RpcErrorType.java:
		// PRUNED_HISTORY_UNAVAILABLE(4444, "Pruned history unavailable").
		{"besu PRUNED_HISTORY_UNAVAILABLE", 4444, "Pruned history unavailable", nil, true},
		// Erigon execution/state/history_reader_v3.go: state.PrunedError,
		// returned by rpc/jsonrpc/eth_receipts.go (eth_getLogs) with the
		// default code -32000.
		{"erigon PrunedError", -32000, "old data not available due to pruning", nil, true},
		{"erigon PrunedError with floor", -32000, "old data not available due to pruning: requested block 25609173, history is available from block 25735899", nil, true},
		// Erigon 2.x turbo/jsonrpc/eth_api.go checkPruneHistory; also what
		// providers such as Allnodes pass on.
		{"erigon 2 checkPruneHistory", -32000, "history has been pruned for this block", nil, true},
		// Erigon 3 eth_getLogs (erigontech/erigon issue 13198).
		{"erigon seek below history", -32000, "state transitaion failed: seek with txNum=1962853355 but data before txNum=2662500000 is not available: blockNum=16999999, txNum=1962853355", nil, true},
		// Case does not matter.
		{"upper case", -32000, "PRUNED HISTORY UNAVAILABLE", nil, true},

		// Not pruned history.
		// go-ethereum eth/api_backend.go, eth/filters/filter.go.
		{"header not found", -32000, "header not found", nil, false},
		// go-ethereum trie/errors.go MissingNodeError: pruned state, not history.
		{"missing trie node", -32000, "missing trie node 1fa3b2c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2 (path ) <nil>", nil, false},
		{"reth state pruned", -32603, "state at block #12369623 is pruned", nil, false},
		{"reth block not found", -32001, "block not found: 0x10", nil, false},
		{"erigon block not found", -32000, "block not found 11185311", nil, false},
		{"besu block not found", -32000, "Block not found", nil, false},
		{"besu unknown block", -39001, "Unknown block", nil, false},
		// go-ethereum eth/filters/api.go errUnknownBlock.
		{"unknown block", -32000, "unknown block", nil, false},
		{"reth beyond head", -32602, "request beyond head block: requested 100, head 50", nil, false},
		{"geth failed to get logs", -32000, "failed to get logs for block #0 (0xd4e567..cb8fa3)", nil, false},
		{"reth block access list pre-Amsterdam", 4445, "block access list not available for pre-Amsterdam blocks", nil, false},
		{"execution reverted", 3, "execution reverted", "0x08c379a0", false},
		{"rate limit", -32005, "rate limit exceeded", nil, false},
		{"alchemy rate", 429, "Your app has exceeded its compute units per second capacity.", nil, false},
		{"range limit", -32005, "query returned more than 10000 results", nil, false},
		{"block range", -32602, "block range is too wide", nil, false},
		{"exceed maximum block range", -32701, "exceed maximum block range: 50000", nil, false},
		{"besu max range", -32005, "Requested range exceeds maximum RPC range limit", nil, false},
		{"nethermind block not found", -32001, "Block not found: FromBlock 0x10", nil, false},
		{"empty", 0, "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := isHistoryPruned(tt.code, tt.message, tt.data); got != tt.want {
				t.Errorf("isHistoryPruned(%d, %q, %v) = %v, want %v", tt.code, tt.message, tt.data, got, tt.want)
			}
		})
	}
}
