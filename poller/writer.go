package poller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Node is what writers need from the chain; *chain.Endpoints is the real
// one. BurnRange may return a range ending before maxTo (a provider's
// limit); the writer records what it got.
type Node interface {
	Target(ctx context.Context) (chain.Target, error)
	BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (chain.Range, error)
	// Headers returns the canonical headers of blocks ns, in batches; a
	// block the node does not have fails the call.
	Headers(ctx context.Context, ns []uint64) (map[uint64]chain.Header, error)
	// Head returns the header of the node's head (latest).
	Head(ctx context.Context) (chain.Header, error)
	// HintDensity tells how many logs the ledger holds over a span of blocks.
	HintDensity(blocks uint64, logs int)
	// Span is how many blocks the next range should ask for: what the node
	// learned of the provider's limit and the chain's log density.
	Span() uint64
}

// WriterConfig is what every writer of one group shares.
type WriterConfig struct {
	ChainID uint64
	// Contracts are the burn contracts the group follows (one or more),
	// read with one eth_getLogs filter under one cursor.
	Contracts []common.Address
	// MaxBlockRange is the most blocks one eth_getLogs call asks for; the
	// node sizes ranges within it (chain.EndpointsConfig).
	MaxBlockRange uint64
	LockWait      time.Duration
	TxTimeout     time.Duration
	// Hook, if set, runs for every newly inserted payment in its transaction.
	Hook *payments.Hook
	// HookDigest is payments.HookDigest of the hook's statement ("" for none).
	HookDigest string
	// IgnoreGroupHook lets this writer record with another hook than the
	// one recorded for the contract (a backfill told so); others refuse to
	// write.
	IgnoreGroupHook bool
	// Group, if set, is the live group this writer's contracts make up:
	// each transaction on its cursor keeps the group's recorded contracts
	// in step with Contracts (see payments.Tx.SyncMembers).
	Group *GroupConfig
}

// GroupConfig names a live group's cursor and its contracts' first blocks.
type GroupConfig struct {
	CursorID string
	// DefaultID says CursorID is the default one (<chain id>:<first
	// contract>), not CURSOR_ID: start-up finds the group by its recorded
	// contracts instead (see ResolveGroup).
	DefaultID bool
	// FirstBlocks are the first blocks of Contracts, in the same order.
	FirstBlocks []int64
	// AllowRemoval lets this writer stop the group following a contract
	// its Contracts lack (ALLOW_CONTRACT_REMOVAL); otherwise it refuses to
	// write.
	AllowRemoval bool
}

// Writer is the one way anything reaches the ledger: every payment, rejected
// log and cursor move goes through a RangeTx it begins. The live loop, its
// catch-up, backfills, rescans and cursor resets all use it. It is safe for
// concurrent use.
type Writer struct {
	cfg     WriterConfig
	store   *payments.Store
	node    Node
	metrics *Metrics
	log     *slog.Logger
	hinted  atomic.Bool
	// window is the last window of ranges in flight (see prefetcher), with
	// which the next transaction starts.
	window atomic.Int32
	// ahead is the read a committed transaction kept for the next one on
	// its cursor (see readAhead).
	aheadMu sync.Mutex
	ahead   *rangeReader
	// hashes are canonical hashes read for the next transaction's ledger
	// check (see FetchHashes).
	hashesMu sync.Mutex
	hashes   map[int64]string
	// careful makes the inserts of the next transaction check each row for
	// a recorded key, until one commits (see RangeTx.insert).
	careful atomic.Bool
}

// NewWriter returns the writer of a group. metrics may be nil.
func NewWriter(cfg WriterConfig, store *payments.Store, node Node, metrics *Metrics, log *slog.Logger) *Writer {
	return &Writer{cfg: cfg, store: store, node: node, metrics: metrics, log: log}
}

// BatchBudget is how long one transaction keeps recording ranges while
// behind: long enough to save commits and lock hand-overs, short enough that
// a failure loses little and the transaction stays far from TX_TIMEOUT.
func (w *Writer) BatchBudget() time.Duration {
	return min(w.cfg.TxTimeout/4, 2*time.Second)
}

// hashOf is block n's canonical hash, from the node.
func (w *Writer) hashOf(ctx context.Context, n int64) (string, error) {
	hs, err := w.node.Headers(ctx, []uint64{nodeBlock(n)})
	if err != nil {
		return "", fmt.Errorf("reading block %d from the node: %w", n, err)
	}
	return hashHex(hs[nodeBlock(n)].Hash), nil
}

// finalHash is block n's canonical hash when the node can prove it final
// (n at or below the finality target), with final false otherwise; ""
// before genesis.
func (w *Writer) finalHash(ctx context.Context, n int64) (hash string, final bool, err error) {
	if n < 0 {
		return "", true, nil
	}
	target, err := w.node.Target(ctx)
	if err != nil {
		return "", false, fmt.Errorf("reading the target: %w", err)
	}
	if n > target.Block {
		return "", false, nil
	}
	hash, err = w.hashOf(ctx, n)
	return hash, err == nil, err
}

// contracts are the contracts the writer records, as the ledger spells them.
func (w *Writer) contracts() []string { return lowerHexes(w.cfg.Contracts) }
