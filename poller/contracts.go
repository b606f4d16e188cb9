package poller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Contract is one burn contract a group follows.
type Contract struct {
	Address common.Address
	// From is the contract's first block (BURN_CONTRACT's @block) when
	// HasFrom; otherwise the group's START_BLOCK stands for it.
	From    int64
	HasFrom bool
}

// ParseContracts reads BURN_CONTRACT: addresses separated by commas, each
// optionally followed by @<first block> ("0xA,0xB@19000000"). check
// validates each address; a contract listed twice is an error.
func ParseContracts(s string, check func(string) error) ([]Contract, error) {
	var out []Contract
	seen := map[common.Address]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("contract %d is empty", i+1)
		}
		addr, block, hasFrom := strings.Cut(part, "@")
		if err := check(addr); err != nil {
			return nil, err
		}
		c := Contract{Address: common.HexToAddress(addr), HasFrom: hasFrom}
		if hasFrom {
			n, err := strconv.ParseInt(block, 10, 64)
			if err != nil || n < 0 || n > chain.MaxBlock {
				return nil, fmt.Errorf("contract %d: %q after @ is not a block number", i+1, block)
			}
			c.From = n
		}
		if seen[c.Address] {
			return nil, fmt.Errorf("contract %s is listed twice", c.Address.Hex())
		}
		seen[c.Address] = true
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no contract")
	}
	return out, nil
}

// Addresses are the contracts' addresses, in order.
func Addresses(cs []Contract) []common.Address {
	out := make([]common.Address, len(cs))
	for i, c := range cs {
		out[i] = c.Address
	}
	return out
}

// FirstBlock is where contract c's history starts: its @block, else start.
func (c Contract) FirstBlock(start int64) int64 {
	if c.HasFrom {
		return c.From
	}
	return start
}

// GroupStart is the first block of a new group: the earliest first block of
// its contracts.
func GroupStart(cs []Contract, start int64) int64 {
	first := cs[0].FirstBlock(start)
	for _, c := range cs[1:] {
		first = min(first, c.FirstBlock(start))
	}
	return first
}

// ErrGroupAmbiguous means a replica's contracts are followed by several
// groups and CURSOR_ID does not say which it belongs to.
var ErrGroupAmbiguous = errors.New("BURN_CONTRACT's contracts are followed by several groups; set CURSOR_ID to the group's")

// ResolveGroup is the group a writer of contracts on chain chainID belongs
// to when CURSOR_ID is not set: defaultID (<chain id>:<first contract>) when
// that cursor exists, or when no group follows any of contracts (a new
// group); otherwise the one group that follows one of them, which keeps its
// id when the contract that named it is removed. Several such groups give
// ErrGroupAmbiguous.
func ResolveGroup(ctx context.Context, store *payments.Store, chainID uint64, contracts []common.Address, defaultID string) (string, error) {
	_, err := store.Cursor(ctx, defaultID)
	if err == nil {
		return defaultID, nil
	}
	if !errors.Is(err, payments.ErrCursorNotFound) {
		return "", err
	}
	groups, err := store.GroupsFollowing(ctx, chainID, lowerHexes(contracts))
	if err != nil {
		return "", err
	}
	switch len(groups) {
	case 0:
		return defaultID, nil
	case 1:
		return groups[0], nil
	}
	return "", fmt.Errorf("%w: %s", ErrGroupAmbiguous, strings.Join(groups, ", "))
}
