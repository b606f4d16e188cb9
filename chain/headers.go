package chain

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"
)

// Header is the part of a block header burnpoller relies on.
type Header struct {
	Number     uint64
	Hash       common.Hash
	ParentHash common.Hash
	Time       uint64
	// Bloom is the block's logsBloom (zero when the node sent none).
	Bloom types.Bloom
	// Txs are the hashes of the block's transactions, as a block read
	// without them in full lists them; nil when not known (a header known
	// only by a receipt or a log).
	Txs []common.Hash
}

// HeadersByNumber returns the canonical headers of blocks ns, asked in
// batches. A block the node does not have fails the call (ErrNotFound).
func (c *Client) HeadersByNumber(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	return c.headers(ctx, ns)
}

// headers fetches the canonical headers of blocks ns, in batches, up to
// fetchParallel of them at a time.
func (c *Client) headers(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	out := make(map[uint64]Header, len(ns))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallel)
	for chunk := range slices.Chunk(ns, c.opts.HeaderBatch) {
		g.Go(func() error {
			raws := make([]*rpcHeader, len(chunk))
			elems := make([]rpc.BatchElem, len(chunk))
			for i, n := range chunk {
				elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(n), false}, Result: &raws[i]}
			}
			if err := c.batch(gctx, elems); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for i, n := range chunk {
				h, err := raws[i].checked(n)
				if err != nil {
					return c.badReply("eth_getBlockByNumber", err)
				}
				out[n] = h
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// HeaderByNumber returns the canonical header of block n.
func (c *Client) HeaderByNumber(ctx context.Context, n uint64) (Header, error) {
	hs, err := c.headers(ctx, []uint64{n})
	if err != nil {
		return Header{}, err
	}
	return hs[n], nil
}

// rpcHeader is the minimum of a block object; fields are pointers so that a
// missing one is an error rather than a zero. The reply reader reads it
// (readHeaderOrNull).
type rpcHeader struct {
	Number     *hexutil.Big    `json:"number"`
	Hash       *common.Hash    `json:"hash"`
	ParentHash *common.Hash    `json:"parentHash"`
	Timestamp  *hexutil.Uint64 `json:"timestamp"`
	LogsBloom  *types.Bloom    `json:"logsBloom"`
	// Transactions are hashes: every block is asked without its
	// transactions in full.
	Transactions []common.Hash `json:"transactions"`
}

func (h *rpcHeader) toHeader() (Header, error) {
	if h.Number == nil || h.Hash == nil || h.ParentHash == nil || h.Timestamp == nil {
		return Header{}, fmt.Errorf("%w: block object lacks number, hash, parentHash or timestamp", ErrBadReply)
	}
	n := (*big.Int)(h.Number)
	if !n.IsUint64() || n.Uint64() > MaxBlock {
		return Header{}, fmt.Errorf("%w: block number %s out of range", ErrBadReply, n)
	}
	if *h.Hash == (common.Hash{}) {
		return Header{}, fmt.Errorf("%w: block %s has a zero hash", ErrBadReply, n)
	}
	hdr := Header{Number: n.Uint64(), Hash: *h.Hash, ParentHash: *h.ParentHash, Time: uint64(*h.Timestamp), Txs: h.Transactions}
	if h.LogsBloom != nil {
		hdr.Bloom = *h.LogsBloom
	}
	return hdr, nil
}

// checked converts a header fetched by number, which must exist and be that block.
func (h *rpcHeader) checked(want uint64) (Header, error) {
	if h == nil {
		return Header{}, fmt.Errorf("%w: header of block %d: %w", ErrBadReply, want, ErrNotFound)
	}
	hdr, err := h.toHeader()
	if err != nil {
		return Header{}, err
	}
	if hdr.Number != want {
		return Header{}, fmt.Errorf("%w: asked for block %d, got header of %d", ErrBadReply, want, hdr.Number)
	}
	return hdr, nil
}

// MaxBlock is the highest block number chain hands out: a header, a log or
// a head above it is a bad reply. It leaves every number chain returns
// room in an int64, the ledger's type, with no check at the caller.
const MaxBlock = 1 << 62
