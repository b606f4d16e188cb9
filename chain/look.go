package chain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
)

// ErrNoLook says a look cannot stand for the reads it would replace here
// (a quorum, finality by depth, an endpoint lagging behind the target
// already seen, a range the provider refuses): the caller reads the target
// and the ranges as it does without one.
var ErrNoLook = errors.New("a look cannot serve this read")

// LookSpec is what a look at a followed chain reads.
type LookSpec struct {
	Contracts []common.Address
	// Cursor is the last block the ledger holds (-1: none): the look
	// credits the blocks after it up to the target.
	Cursor int64
	// Seen is the first block above the target that head tracking has not
	// read: the look reads the head's burns from there, or from the block
	// after the target if that is higher.
	Seen uint64
	// Head is the head block the node reported a moment ago (HeadNumber):
	// the look reads up to it, by number, with its header in the same
	// batch as the logs, as BurnRange reads a range's last block.
	Head uint64
	// Known, when set, is the head's header, read a moment ago
	// (Endpoints.Head; Head is its number): the batch does not read it
	// again. Every block above the target the look reads then has its
	// header held, and its logsBloom checked against the reply (see
	// BurnRange): the blooms, not a header beside the logs, vouch that
	// the reply left nothing out there. The blocks the look credits are
	// vouched for by the target read in the batch, as Target's is.
	Known *Header
	// Recheck, when set, also reads the burns of blocks [RecheckFrom,
	// Cursor] again, with the cursor block's header (a rescan).
	Recheck     bool
	RecheckFrom uint64
}

// Look is one look at a followed chain up to a head block: its header, the
// finality target, the burns of the blocks the target passed since the
// cursor, and those of the blocks above the target that head tracking has
// not read. One JSON-RPC batch carries the head's header, the target and
// one eth_getLogs over all of those blocks, by number; the headers a
// continuity check needs that the batch did not give, and the receipts of
// the blocks to credit, follow.
type Look struct {
	Head   Header
	Target Target
	// Credit is the burns of blocks [Cursor+1, min(Target.Block, Head)],
	// checked as BurnRange checks a range, receipts included; nil when the
	// target did not pass the cursor.
	Credit *Range
	// Pending is the burns of blocks [max(Seen, Target.Block+1), Head],
	// read as head tracking reads them (CreditsNothing); nil when there is
	// none.
	Pending *Range
	// Recheck is what LookSpec.Recheck asked for; nil when not asked.
	Recheck *Recheck

	// asked is the eth_getLogs range, with the logs it gave (from the
	// first one's block on): what range sizing learns from.
	asked    [2]uint64
	logs     int
	logsFrom uint64
}

// Recheck is the burns of blocks below the cursor read again, as the node
// gives them now: each log validated as any reply's, and the cursor block's
// header read in the same batch. Nothing here is confirmed in receipts or
// checked against headers: it is for comparing with what the ledger holds,
// which was, when recorded.
type Recheck struct {
	Cursor   Header
	Burns    []Burn
	Rejected []Rejected
}

// HeadNumber returns the serving endpoint's head block number
// (eth_blockNumber), the cheapest read that says whether the head moved.
func (e *Endpoints) HeadNumber(ctx context.Context) (uint64, error) {
	return firstAnswer(ctx, e, func(ctx context.Context, ep *endpoint) (uint64, error) {
		return ep.c.BlockNumber(ctx)
	})
}

// Look looks at the chain through the serving endpoint (see Look). It
// returns an error wrapping ErrNoLook when a look cannot stand for the
// reads it replaces: with a quorum (every credited range needs k
// endpoints), with finality by depth, from an endpoint whose target is
// behind the highest seen (Target hands over), or when the provider
// refuses the range (BurnRange learns its limit). A failure of the endpoint
// hands over, as any read's.
func (e *Endpoints) Look(ctx context.Context, spec LookSpec) (Look, error) {
	if !e.CanLook() {
		return Look{}, ErrNoLook
	}
	ep, _, err := e.pick(ctx, nil)
	if err != nil {
		return Look{}, err
	}
	if from, to := spec.asks(); to >= from {
		e.mu.Lock()
		span := e.sizer.lookSpan(&ep.size)
		e.mu.Unlock()
		if to-from+1 > span {
			return Look{}, fmt.Errorf("%w: %d blocks, more than the %d a range of this endpoint may ask", ErrNoLook, to-from+1, span)
		}
	}
	start := time.Now()
	lk, err := ep.c.look(ctx, string(e.cfg.Finality), spec)
	var rpcErr *Error
	switch {
	case errors.Is(err, ErrResponseTooLarge):
		// Too many logs for one reply: the ranges shrink to the density,
		// and the span the caller looks over with them (Span).
		from, to := spec.asks()
		e.mu.Lock()
		e.sizer.tooLarge(to-from+1, from, cutReply{})
		e.mu.Unlock()
		return Look{}, fmt.Errorf("%w: %w", ErrNoLook, err)
	case errors.As(err, &rpcErr) && rpcErr.Class == ClassRangeLimit:
		// The provider's limit, learned as a range's refusal teaches it.
		from, to := spec.asks()
		e.mu.Lock()
		next := e.sizer.refused(&ep.size, from, to, rpcErr.Limit)
		e.mu.Unlock()
		e.obs.RangeLimit(ep.c.String(), next)
		return Look{}, fmt.Errorf("%w: %w", ErrNoLook, err)
	case err != nil:
		e.fail(ctx, ep, err)
		return Look{}, err
	}
	e.mu.Lock()
	highest := e.highest
	e.mu.Unlock()
	if lk.Target.Block < highest {
		e.obs.Lagging(ep.c.String(), highest-lk.Target.Block)
		return Look{}, fmt.Errorf("%w: %s's target %d is behind the highest seen, %d", ErrNoLook, ep.c, lk.Target.Block, highest)
	}
	lk.Target = e.serve(ep, lk.Target.Block)
	from, to := lk.asked[0], lk.asked[1]
	e.succeed(ep, to-from+1, densitySpan(from, to, lk.logsFrom, lk.logs), lk.logs, time.Since(start))
	return lk, nil
}

// maxLookHeaders is how many blocks a look with a known head reads above
// the target before it reads the head by number instead (each needs its
// header then).
const maxLookHeaders = 16

// CanLook says a look can stand for the reads it replaces with this
// configuration: not with a quorum (every credited range needs k
// endpoints), nor with finality by depth (no tag to read).
func (e *Endpoints) CanLook() bool {
	return e.cfg.Quorum <= 1 && e.cfg.Finality != FinalityLatest
}

// asks is the block range of the look's eth_getLogs: from the cursor's
// block (or the first block rechecked) to the head.
func (spec LookSpec) asks() (from, to uint64) {
	from = uint64(max(spec.Cursor, 0))
	if spec.rechecks() {
		from = spec.RecheckFrom
	}
	return from, spec.Head
}

// rechecks says the look reads a rescan's blocks.
func (spec LookSpec) rechecks() bool {
	return spec.Recheck && spec.Cursor >= 0 && spec.RecheckFrom <= uint64(spec.Cursor)
}

// lookReply is what a look's batch gave.
type lookReply struct {
	head Header
	// known says head is spec.Known: it was read before the batch.
	known  bool
	final  *Header // the target's; nil when the node has none yet
	cursor *rpcHeader
	logs   []types.Log
	asked  [2]uint64
}

// look reads spec from this node: the target (tag's block), the logs from
// the cursor's block to the head, by number, and the head block's header
// unless spec knows it, in one batch (lookBatch); then the headers the
// continuity checks and the blooms need, and the receipts of the blocks to
// credit.
func (c *Client) look(ctx context.Context, tag string, spec LookSpec) (Look, error) {
	if spec.Cursor > int64(spec.Head) {
		return Look{}, fmt.Errorf("%w: head %d below the cursor %d", ErrNoLook, spec.Head, spec.Cursor)
	}
	reply, err := c.lookBatch(ctx, tag, spec)
	if err != nil {
		return Look{}, err
	}
	lk := Look{Head: reply.head, Target: Target{Block: -1, Highest: -1}, asked: reply.asked, logs: len(reply.logs)}
	if reply.final != nil {
		lk.Target = Target{Block: int64(reply.final.Number), Highest: int64(reply.final.Number)}
	}
	for i, l := range reply.logs {
		if i == 0 || l.BlockNumber < lk.logsFrom {
			lk.logsFrom = l.BlockNumber
		}
	}
	parts := splitLook(spec, reply, lk.Target.Block, c.wantsHeader)
	more, err := c.headers(ctx, parts.need)
	if err != nil {
		return Look{}, err
	}
	for n, h := range more {
		parts.canonical[n] = h
	}
	if parts.recheck {
		cursor, err := reply.cursor.checked(uint64(spec.Cursor))
		if err != nil {
			return Look{}, c.badReply("eth_getBlockByNumber", err)
		}
		burns, rejected, err := ValidateLogs(parts.recheckLogs, spec.Contracts, spec.RecheckFrom, uint64(spec.Cursor))
		if err != nil {
			return Look{}, c.badReply("eth_getLogs", err)
		}
		lk.Recheck = &Recheck{Cursor: cursor, Burns: burns, Rejected: rejected}
	}
	if from, to := parts.credit[0], parts.credit[1]; from <= to {
		r, err := c.settle(ctx, spec.Contracts, from, to, parts.creditLogs, within(parts.canonical, from, to))
		if err != nil {
			return Look{}, err
		}
		lk.Credit = &r
	}
	if from, to := parts.pending[0], parts.pending[1]; from <= to {
		r, err := c.settle(CreditsNothing(ctx), spec.Contracts, from, to, parts.pendLogs, within(parts.canonical, from, to))
		if err != nil {
			return Look{}, err
		}
		lk.Pending = &r
	}
	return lk, nil
}

// lookBatch sends a look's batch and checks its headers.
func (c *Client) lookBatch(ctx context.Context, tag string, spec LookSpec) (lookReply, error) {
	var address any = spec.Contracts
	if len(spec.Contracts) == 1 {
		address = spec.Contracts[0]
	}
	// From the cursor's own block, not the one after, which is past the
	// head when the head has not moved beyond the cursor: a range starting
	// in the future is an error. Its logs are left out (splitLook).
	ask, _ := spec.asks()
	above := max(spec.Seen, ask)
	known := spec.Known != nil && spec.Known.Number == spec.Head && (above > spec.Head || spec.Head-above <= maxLookHeaders)
	var (
		logs                       []types.Log
		headRaw, tagRaw, cursorRaw *rpcHeader
	)
	elems := []rpc.BatchElem{
		{Method: "eth_getBlockByNumber", Args: []any{tag, false}, Result: &tagRaw},
		{Method: "eth_getLogs", Args: []any{map[string]any{
			"fromBlock": hexutil.Uint64(ask), "toBlock": hexutil.Uint64(spec.Head), "address": address, "topics": [][]common.Hash{{BurnTopic}},
		}}, Result: &logs},
	}
	if !known {
		elems = append([]rpc.BatchElem{{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(spec.Head), false}, Result: &headRaw}}, elems...)
	}
	if spec.rechecks() {
		elems = append(elems, rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(spec.Cursor), false}, Result: &cursorRaw})
	}
	err := c.batch(ctx, elems)
	switch {
	case err != nil && !known && headRaw == nil && errors.As(err, new(*Error)):
		// The node no longer has the head it reported a moment ago (a
		// reorganisation under way, or another node behind a balancer),
		// and refused the range up to it.
		return lookReply{}, fmt.Errorf("%w: block %d: %w", ErrNoLook, spec.Head, err)
	case err != nil:
		return lookReply{}, err
	case !known && headRaw == nil:
		// The same, the range answered: nothing to judge by.
		return lookReply{}, fmt.Errorf("%w: block %d: %w", ErrNoLook, spec.Head, ErrNotFound)
	}
	r := lookReply{cursor: cursorRaw, asked: [2]uint64{ask, spec.Head}, known: known}
	if known {
		r.head = *spec.Known
	} else if r.head, err = headRaw.checked(spec.Head); err != nil {
		return lookReply{}, c.badReply("eth_getBlockByNumber", err)
	}
	if tagRaw != nil {
		final, err := tagRaw.toHeader()
		if err != nil {
			return lookReply{}, c.badReply("eth_getBlockByNumber", err)
		}
		if final.Number == r.head.Number && final.Hash != r.head.Hash {
			// The head replaced at its height between two reads: no
			// answer to judge by.
			return lookReply{}, fmt.Errorf("%w: block %d is %s as the head and %s as %s", ErrNoLook, final.Number, r.head.Hash.Hex(), final.Hash.Hex(), tag)
		}
		r.final = &final
	}
	r.logs = logs
	return r, nil
}

// lookParts is a look's reply split into what it serves: the blocks to
// credit and those above the target (first and last block; first > last
// when none), a rescan's, their logs, the headers held, and the headers
// still to read (sorted, each once).
type lookParts struct {
	credit, pending                   [2]uint64
	recheck                           bool
	creditLogs, pendLogs, recheckLogs []types.Log
	canonical                         map[uint64]Header
	need                              []uint64
}

// splitLook splits reply: a target past the head (sealed meanwhile)
// credits up to the head now, the rest next time. The headers needed are
// the first block's of each part (its parent is what continuity checks),
// every block above the target when the head was read beforehand (its
// bloom vouches for the reply), the blocks holding pending logs (their
// hashes), and the blocks holding logs to credit that wants says to read.
func splitLook(spec LookSpec, reply lookReply, target int64, wants func(uint64, map[uint64]Header, bool) bool) lookParts {
	head := reply.head
	p := lookParts{
		credit:    [2]uint64{1, 0}, // none
		pending:   [2]uint64{max(spec.Seen, uint64(target+1)), head.Number},
		recheck:   spec.rechecks(),
		canonical: map[uint64]Header{head.Number: head},
	}
	if to := min(target, int64(head.Number)); to > spec.Cursor {
		p.credit = [2]uint64{uint64(spec.Cursor + 1), uint64(to)}
	}
	if reply.final != nil && reply.final.Number <= head.Number {
		p.canonical[reply.final.Number] = *reply.final
	}
	credit, pend := p.credit[0] <= p.credit[1], p.pending[0] <= p.pending[1]
	var need []uint64
	if credit {
		need = append(need, p.credit[0])
	}
	if pend {
		need = append(need, p.pending[0])
		for n := p.pending[0] + 1; reply.known && n < p.pending[1]; n++ {
			need = append(need, n)
		}
	}
	for _, l := range reply.logs {
		switch n := l.BlockNumber; {
		case p.recheck && n >= spec.RecheckFrom && int64(n) <= spec.Cursor:
			p.recheckLogs = append(p.recheckLogs, l)
		case credit && n >= p.credit[0] && n <= p.credit[1]:
			p.creditLogs = append(p.creditLogs, l)
			if wants(n, p.canonical, true) {
				need = append(need, n)
			}
		case pend && n >= p.pending[0] && n <= p.pending[1]:
			p.pendLogs = append(p.pendLogs, l)
			need = append(need, n)
		}
		// Other logs: the cursor's block, blocks head tracking has read,
		// blocks sealed after the head was read.
	}
	need = slices.DeleteFunc(need, func(n uint64) bool { _, ok := p.canonical[n]; return ok })
	slices.Sort(need)
	p.need = slices.Compact(need)
	return p
}

// wantsHeader says a look reads the header of block n, which holds a log
// to credit: without the receipt check its hash comes from its header;
// with it, its header lists its transactions, whose receipts may cost less
// than the block's (see byTransaction), when the headers the look holds say
// the chain's blocks are small enough for that to pay for the header.
func (c *Client) wantsHeader(n uint64, canonical map[uint64]Header, credited bool) bool {
	if _, ok := canonical[n]; ok {
		return false
	}
	if !credited || !c.opts.VerifyReceipts {
		return true
	}
	w := c.opts.Weights
	most := 1
	for _, h := range canonical {
		most = max(most, len(h.Txs))
	}
	return w.Of("eth_getBlockByNumber")+float64(most)*w.Of("eth_getTransactionReceipt") < w.Of("eth_getBlockReceipts")
}

// within is the headers of canonical in [from, to].
func within(canonical map[uint64]Header, from, to uint64) map[uint64]Header {
	out := make(map[uint64]Header, len(canonical))
	for n, h := range canonical {
		if n >= from && n <= to {
			out[n] = h
		}
	}
	return out
}
