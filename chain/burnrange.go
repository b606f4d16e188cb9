package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"
)

// Range is a node's answer for one block range: the range's end headers, its
// burns, and the logs of the burn event that did not decode.
type Range struct {
	// From and To are the canonical headers of the first and last block.
	From, To Header
	Burns    []Burn
	Rejected []Rejected
	// Hidden is how many of the logs came from receipts, not from the
	// eth_getLogs reply, which had left them out.
	Hidden int
}

// BurnRange fetches the burn logs of contracts in [from, to] with, in the
// same JSON-RPC batch, the headers of blocks from and to, then the headers of
// every other block holding a log, and validates the reply: each log must be
// a LogBurnWithDigest from one of contracts inside the range and carry its
// block's canonical hash. Then receipts confirm it (Options.VerifyReceipts)
// and resolve the blocks whose bloom holds a burn the reply lacks. An
// inconsistent reply gives an error of ClassBadReply.
func (c *Client) BurnRange(ctx context.Context, contracts []common.Address, from, to uint64) (Range, error) {
	if from > to {
		return Range{}, fmt.Errorf("empty range [%d, %d]", from, to)
	}
	if len(contracts) == 0 {
		return Range{}, errors.New("no contract to read")
	}
	var address any = contracts
	if len(contracts) == 1 {
		address = contracts[0]
	}
	filter := map[string]any{
		"fromBlock": hexutil.Uint64(from),
		"toBlock":   hexutil.Uint64(to),
		"address":   address,
		"topics":    [][]common.Hash{{BurnTopic}},
	}
	var (
		logs           []types.Log
		fromHdr, toHdr *rpcHeader
		scan           = &logScan{}
	)
	elems := []rpc.BatchElem{
		{Method: "eth_getLogs", Args: []any{filter}, Result: &logs},
		{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(from), false}, Result: &fromHdr},
	}
	if to != from {
		// A one-block range's first block is its last: one header.
		elems = append(elems, rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(to), false}, Result: &toHdr})
	}
	err := c.batch(withLogScan(ctx, scan), elems)
	if err != nil {
		var e *Error
		if errors.Is(err, ErrResponseTooLarge) && errors.As(err, &e) {
			cut := scan.reached()
			e.cut = &cut
		}
		return Range{}, err
	}
	if to == from {
		toHdr = fromHdr
	}
	canonical := make(map[uint64]Header, 2)
	for _, h := range []struct {
		raw  *rpcHeader
		want uint64
	}{{fromHdr, from}, {toHdr, to}} {
		hdr, err := h.raw.checked(h.want)
		if err != nil {
			return Range{}, c.badReply("eth_getBlockByNumber", err)
		}
		canonical[h.want] = hdr
	}
	return c.settle(ctx, contracts, from, to, logs, canonical)
}

// settle checks the logs a node gave for blocks [from, to] of contracts
// and makes them a Range: canonical holds the headers read with them (at
// least from's and to's), in the same batch as the logs or after it. Each
// log must be a burn-event log of contracts inside the range and carry the
// canonical hash of its block; then receipts confirm it
// (Options.VerifyReceipts, unless ctx credits nothing) and resolve the
// blocks whose bloom holds a burn the reply lacks.
func (c *Client) settle(ctx context.Context, contracts []common.Address, from, to uint64, logs []types.Log, canonical map[uint64]Header) (Range, error) {
	burns, rejected, err := ValidateLogs(logs, contracts, from, to)
	if err != nil {
		return Range{}, c.badReply("eth_getLogs", err)
	}

	// Every log must sit in the block the node calls canonical. With the
	// receipts check, the receipts of each block holding logs are asked by
	// block number, so they are the canonical block's, and the hash they
	// carry is the block's canonical hash: no header is needed besides the
	// range's ends. Without it, the headers of the other blocks holding
	// logs are read (while the receipts of blocks chosen by their bloom
	// are).
	verify := c.opts.VerifyReceipts && !creditsNothing(ctx)
	var missing []uint64
	for _, l := range logs {
		if _, ok := canonical[l.BlockNumber]; !ok && !verify && !slices.Contains(missing, l.BlockNumber) {
			missing = append(missing, l.BlockNumber)
		}
	}
	check := receiptBlocks(logs, contracts, canonical, verify)
	var (
		more     map[uint64]Header
		receipts map[uint64][]rpcReceipt
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { more, err = c.headers(gctx, missing); return err })
	g.Go(func() (err error) { receipts, err = c.receipts(gctx, check.blocks, check.logs); return err })
	if err := g.Wait(); err != nil {
		return Range{}, err
	}
	for n, h := range more {
		canonical[n] = h
	}
	if err := c.hashesFromReceipts(&check, receipts, canonical); err != nil {
		return Range{}, err
	}
	for _, l := range logs {
		if h := canonical[l.BlockNumber]; l.BlockHash != h.Hash {
			return Range{}, c.badReply("eth_getLogs", fmt.Errorf("%w: log of tx %s index %d has block hash %s, canonical block %d has %s",
				ErrBadReply, l.TxHash.Hex(), l.Index, l.BlockHash.Hex(), l.BlockNumber, h.Hash.Hex()))
		}
	}
	r := Range{From: canonical[from], To: canonical[to], Burns: burns, Rejected: rejected}
	if err := c.crossCheck(&r, check, receipts, contracts); err != nil {
		return Range{}, err
	}
	return r, nil
}

// fetchParallel is how many batches of one kind (headers, receipts) a
// range has in flight at once: a range's round trips overlap rather than
// queue, while a provider sees a few requests at a time, not a flood.
const fetchParallel = 4

type creditsNothingKey struct{}

// CreditsNothing marks ctx for reads whose result is never credited (head
// tracking's pending payments): BurnRange under it neither confirms logs in
// receipts nor asks a quorum, and reads from the serving endpoint alone.
// The bloom check still runs. Nodes a block apart at the head would
// otherwise disagree on every read and demote each other.
func CreditsNothing(ctx context.Context) context.Context {
	return context.WithValue(ctx, creditsNothingKey{}, true)
}

func creditsNothing(ctx context.Context) bool { return ctx.Value(creditsNothingKey{}) != nil }
