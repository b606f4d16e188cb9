package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"
)

// rpcReceipt is the part of a receipt the cross-check reads. The reply
// reader refuses a receipt lacking any of the first three (readReceipt),
// and a log of it that cannot be one. Logs are its burn-event logs
// (topic0 BurnTopic), of whichever contract: the cross-check reads no
// other, and a dense block's receipts hold as many others (each burn's
// token Transfer).
type rpcReceipt struct {
	TxHash    common.Hash
	BlockHash common.Hash
	Status    uint64
	Logs      []types.Log
}

// receiptBatchStart is how many blocks' receipts one batch asks for at first:
// on a sparse chain a range's few blocks holding burns go in one round
// trip. A block's receipts can run to megabytes and a reply is capped at
// MaxResponseBytes: a batch over it is halved, and the smaller size is kept
// for the client's later batches (Client.receiptBatch).
const receiptBatchStart = 32

// receiptTxs is how many transaction receipts one batch asks for.
const receiptTxs = 100

// receipts reads the receipts of blocks: every receipt of each block, by
// block number (eth_getBlockReceipts in batches of about receiptBatchLogs
// logs, fetchParallel at a time) or, when every block's header lists few
// transactions, by each of them (see byTransaction); or, from a node
// without eth_getBlockReceipts or for a block whose receipts are too large
// for one reply, eth_getTransactionReceipt for each transaction the logs
// name (every one, for a block known only by its bloom).
func (c *Client) receipts(ctx context.Context, blocks []Header, logs map[uint64][]types.Log) (map[uint64][]rpcReceipt, error) {
	set := &receiptSet{m: make(map[uint64][]rpcReceipt, len(blocks))}
	switch {
	case len(blocks) > 0 && !slices.ContainsFunc(blocks, func(h Header) bool { return !c.byTransaction(h) }):
		// Every block by its transactions. A range that also needs blocks
		// read whole (a catch-up's, whose middle blocks' transactions are
		// not known) reads them all whole, as many requests as before.
		if err := c.allTxReceipts(ctx, blocks, set); err != nil {
			return nil, err
		}
	case c.noBlockReceipts.Load():
		set.left = blocks
	default:
		if err := c.blockReceiptsInBatches(ctx, blocks, logs, set); err != nil {
			return nil, err
		}
	}
	for _, h := range set.left {
		var txs []common.Hash
		if ls := logs[h.Number]; len(ls) > 0 {
			// The transactions the reply names; a block chosen for its
			// bloom alone needs all of its own.
			for _, l := range ls {
				if !slices.Contains(txs, l.TxHash) {
					txs = append(txs, l.TxHash)
				}
			}
		} else {
			var err error
			if txs, err = c.blockTxs(ctx, h); err != nil {
				return nil, err
			}
		}
		size := receiptTxs
		if set.over[h.Number] {
			// The block's receipts were over the cap as one reply; its
			// transactions' together most likely are too. Each batch member
			// is billed as one call, so two halves cost what one batch does,
			// and a reply over the cap costs every call in it for nothing.
			size = min(size, (len(txs)+1)/2)
		}
		rs, err := c.txReceipts(ctx, txs, size)
		if err != nil {
			return nil, err
		}
		set.m[h.Number] = rs
	}
	return set.m, nil
}

// byTransaction says every receipt of block h costs less read one
// transaction at a time than as the block's receipts: its header lists its
// transactions (the range holds it), and as many eth_getTransactionReceipt
// weigh less than one eth_getBlockReceipts. Both reads give every receipt of
// the block, each naming the block's hash: the same proof. A quiet chain's
// blocks hold a few transactions; a busy one's hundreds.
func (c *Client) byTransaction(h Header) bool {
	w := c.opts.Weights
	return len(h.Txs) > 0 && float64(len(h.Txs))*w.Of("eth_getTransactionReceipt") < w.Of("eth_getBlockReceipts")
}

// allTxReceipts reads every receipt of blocks, whose headers list their
// transactions, transaction by transaction, into set.
func (c *Client) allTxReceipts(ctx context.Context, blocks []Header, set *receiptSet) error {
	var txs []common.Hash
	for _, h := range blocks {
		txs = append(txs, h.Txs...)
	}
	rs, err := c.txReceipts(ctx, txs, receiptTxs)
	if err != nil {
		return err
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, h := range blocks {
		set.m[h.Number], rs = rs[:len(h.Txs)], rs[len(h.Txs):]
	}
	return nil
}

// receiptSet gathers the receipts of batches read at the same time, and the
// blocks left to read transaction by transaction (over: those left because
// their receipts were over the reply cap).
type receiptSet struct {
	mu   sync.Mutex
	m    map[uint64][]rpcReceipt
	left []Header
	over map[uint64]bool
}

func (s *receiptSet) leave(blocks []Header, overCap bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left = append(s.left, blocks...)
	if overCap {
		if s.over == nil {
			s.over = make(map[uint64]bool)
		}
		for _, h := range blocks {
			s.over[h.Number] = true
		}
	}
}

// blockReceipts asks for the receipts of blocks in one batch, into set. The
// blocks left to ask transaction by transaction go to set.left: all of them
// when the node has no eth_getBlockReceipts, a block alone in its batch
// whose receipts exceed the reply cap.
func (c *Client) blockReceipts(ctx context.Context, blocks []Header, logs map[uint64][]types.Log, set *receiptSet) error {
	raws := make([][]rpcReceipt, len(blocks))
	elems := make([]rpc.BatchElem, len(blocks))
	for i, h := range blocks {
		elems[i] = rpc.BatchElem{Method: "eth_getBlockReceipts", Args: []any{hexutil.Uint64(h.Number)}, Result: &raws[i]}
	}
	err := c.batch(ctx, elems)
	switch {
	case err == nil:
	case methodMissing(err):
		c.noBlockReceipts.Store(true)
		set.leave(blocks, false)
		return nil
	case errors.Is(err, ErrResponseTooLarge) && len(blocks) > 1:
		// Smaller batches from now on, these blocks included.
		c.shrinkReceiptBatch(len(blocks) / 2)
		return c.blockReceiptsInBatches(ctx, blocks, logs, set)
	case errors.Is(err, ErrResponseTooLarge):
		set.leave(blocks, true)
		return nil
	default:
		return err
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	for i, h := range blocks {
		if raws[i] == nil {
			// null: the node does not have the block.
			return c.badReply("eth_getBlockReceipts", fmt.Errorf("%w: no receipts for block %d", ErrBadReply, h.Number))
		}
		set.m[h.Number] = raws[i]
	}
	return nil
}

// receiptBatchLogs is about how many of the reply's logs the blocks of one
// receipts batch hold: a dense range's receipts go as a few requests at
// once, which a node serves in parallel (geth answers a batch's calls one
// after another, separate requests at the same time), where one batch of
// every block would queue. On geth --dev, the receipts of 2,000 burns in
// five blocks: 1.47-1.82 s per 30,000 burns in one batch per range,
// 0.84-1.21 s in batches of one to three blocks at once (BENCHMARKS.md).
const receiptBatchLogs = 1000

// blockReceiptsInBatches asks for the receipts of blocks in batches of at
// most the current size and about receiptBatchLogs of logs' logs each,
// fetchParallel at a time; a reply over the cap shrinks the size for the
// batches asked after it.
func (c *Client) blockReceiptsInBatches(ctx context.Context, blocks []Header, logs map[uint64][]types.Log, set *receiptSet) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallel)
	for len(blocks) > 0 {
		if c.noBlockReceipts.Load() {
			set.leave(blocks, false)
			break
		}
		n := receiptBatchLen(blocks, logs, c.receiptBatchSize())
		batch := blocks[:n]
		g.Go(func() error { return c.blockReceipts(gctx, batch, logs, set) })
		blocks = blocks[n:]
	}
	return g.Wait()
}

// receiptBatchLen is how many of blocks the next batch takes: at least
// one, at most size, and no more once their logs reach receiptBatchLogs.
func receiptBatchLen(blocks []Header, logs map[uint64][]types.Log, size int) int {
	n, held := 0, 0
	for n < min(size, len(blocks)) && (n == 0 || held+len(logs[blocks[n].Number]) <= receiptBatchLogs) {
		held += len(logs[blocks[n].Number])
		n++
	}
	return n
}

// receiptBatchSize is how many blocks' receipts a batch asks for now.
func (c *Client) receiptBatchSize() int {
	if n := int(c.receiptBatch.Load()); n > 0 {
		return n
	}
	return receiptBatchStart
}

// shrinkReceiptBatch keeps n as the batch size when it is smaller.
func (c *Client) shrinkReceiptBatch(n int) {
	for {
		cur := c.receiptBatch.Load()
		if (cur > 0 && int(cur) <= n) || c.receiptBatch.CompareAndSwap(cur, int32(max(n, 1))) {
			return
		}
	}
}

// blockTxs returns the transaction hashes of block h.
func (c *Client) blockTxs(ctx context.Context, h Header) ([]common.Hash, error) {
	var b *rpcHeader
	if err := c.call(ctx, &b, "eth_getBlockByHash", h.Hash, false); err != nil {
		return nil, err
	}
	if b == nil || b.Hash == nil || *b.Hash != h.Hash {
		return nil, c.badReply("eth_getBlockByHash", fmt.Errorf("%w: no block %s, which the node called canonical block %d", ErrBadReply, h.Hash.Hex(), h.Number))
	}
	return b.Transactions, nil
}

// txReceipts asks for the receipts of txs in batches of up to size, one
// after another. A transaction without a receipt is a bad reply: the
// node named it in a canonical block. A batch whose reply is over the cap
// (a block of thousands of burns: a receipt of a hundred burns with their
// token transfers is about 125 KB) is halved until it fits, for the rest of
// this call; a single receipt over the cap cannot be read, and says so.
func (c *Client) txReceipts(ctx context.Context, txs []common.Hash, size int) ([]rpcReceipt, error) {
	out := make([]rpcReceipt, 0, len(txs))
	for len(txs) > 0 {
		chunk := txs[:min(len(txs), size)]
		raws := make([]*rpcReceipt, len(chunk))
		elems := make([]rpc.BatchElem, len(chunk))
		for i, tx := range chunk {
			elems[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{tx}, Result: &raws[i]}
		}
		err := c.batch(ctx, elems)
		switch {
		case errors.Is(err, ErrResponseTooLarge) && len(chunk) > 1:
			size = len(chunk) / 2
			continue
		case errors.Is(err, ErrResponseTooLarge):
			return nil, fmt.Errorf("the receipt of tx %s alone is over the reply cap of %d bytes: %w", chunk[0].Hex(), c.opts.MaxResponseBytes, err)
		case err != nil:
			return nil, err
		}
		for i, rc := range raws {
			if rc == nil {
				return nil, c.badReply("eth_getTransactionReceipt", fmt.Errorf("%w: no receipt for tx %s", ErrBadReply, chunk[i].Hex()))
			}
			out = append(out, *rc)
		}
		txs = txs[len(chunk):]
	}
	return out, nil
}

// methodMissing says a call failed because the node does not offer the
// method (JSON-RPC -32601, or a provider's words for it).
func methodMissing(err error) bool {
	var re rpc.Error
	if errors.As(err, &re) {
		// -32602: a node that takes no block hash there. Other codes
		// (-32000 above all) carry it in words.
		return re.ErrorCode() == -32601 || re.ErrorCode() == -32602 || missingText(re.Error())
	}
	var he rpc.HTTPError
	if errors.As(err, &he) {
		if code, msg, _, ok := bodyError(he.Body); ok {
			return code == -32601 || code == -32602 || missingText(msg)
		}
	}
	return ClassOf(err) == ClassPermanent && missingText(err.Error())
}

func missingText(msg string) bool {
	return containsAny(strings.ToLower(msg), "method not found", "does not exist", "not supported", "unsupported method",
		"method not available", "not implemented", "unknown method")
}
