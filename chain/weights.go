package chain

// Weights are what a provider bills one JSON-RPC call, by method ("compute
// units"): each member of a batch is one call. They choose between two
// reads that prove the same thing (a block's receipts at once, or its
// transactions' one by one), and weigh the calls counted in
// burnpoller_rpc_compute_units_total.
type Weights map[string]float64

// DefaultWeights is a large provider's public table (Alchemy's compute
// units per method, docs.alchemy.com), for the methods burnpoller calls.
func DefaultWeights() Weights {
	return Weights{
		"eth_blockNumber":           10,
		"eth_chainId":               10,
		"eth_getBlockByNumber":      16,
		"eth_getBlockByHash":        21,
		"eth_getLogs":               75,
		"eth_getTransactionReceipt": 15,
		"eth_getBlockReceipts":      500,
	}
}

// Of is method's weight: 0 for a method the table lacks.
func (w Weights) Of(method string) float64 { return w[method] }
