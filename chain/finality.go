package chain

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/common/hexutil"
)

// Finality selects how the target block is chosen.
type Finality string

// The finality modes. FinalityLatest is the head minus a number of confirmations.
const (
	FinalityFinalized Finality = "finalized"
	FinalitySafe      Finality = "safe"
	FinalityLatest    Finality = "latest"
)

// BlockNumber returns the node's head (eth_blockNumber).
func (c *Client) BlockNumber(ctx context.Context) (uint64, error) {
	var head hexutil.Uint64
	if err := c.call(ctx, &head, "eth_blockNumber"); err != nil {
		return 0, err
	}
	if head > MaxBlock {
		return 0, c.badReply("eth_blockNumber", fmt.Errorf("%w: block number %d out of range", ErrBadReply, uint64(head)))
	}
	return uint64(head), nil
}

// Target returns the highest block this node can prove under finality: its
// finalized or safe block, or its head minus confirmations. It returns -1
// when there is no such block yet.
func (c *Client) Target(ctx context.Context, finality Finality, confirmations uint64) (int64, error) {
	switch finality {
	case FinalityFinalized, FinalitySafe:
		h, err := c.HeaderByTag(ctx, string(finality))
		if errors.Is(err, ErrNoFinalityBlock) {
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
		return int64(h.Number), nil // at most MaxBlock (toHeader)
	case FinalityLatest:
		head, err := c.BlockNumber(ctx)
		if err != nil {
			return 0, err
		}
		if head < confirmations {
			return -1, nil
		}
		return int64(head - confirmations), nil // at most MaxBlock (BlockNumber)
	default:
		return 0, fmt.Errorf("unknown finality %q", finality)
	}
}

// HeaderByTag returns the header of the block named by tag ("latest",
// "safe", "finalized"). A node without such a block yet gives ErrNoFinalityBlock.
func (c *Client) HeaderByTag(ctx context.Context, tag string) (Header, error) {
	var h *rpcHeader
	err := c.call(ctx, &h, "eth_getBlockByNumber", tag, false)
	if err != nil {
		// geth: "finalized block not found" / "safe block not found".
		if (tag == "finalized" || tag == "safe") && strings.Contains(strings.ToLower(err.Error()), tag+" block not found") {
			return Header{}, fmt.Errorf("%s: %w", tag, ErrNoFinalityBlock)
		}
		return Header{}, err
	}
	if h == nil {
		if tag == "finalized" || tag == "safe" {
			return Header{}, fmt.Errorf("%s: %w", tag, ErrNoFinalityBlock)
		}
		return Header{}, fmt.Errorf("%s block: %w", tag, ErrNotFound)
	}
	hdr, err := h.toHeader()
	if err != nil {
		return Header{}, c.badReply("eth_getBlockByNumber", err)
	}
	return hdr, nil
}
