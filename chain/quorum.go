package chain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

var (
	// ErrQuorumUnavailable means fewer than RPC_QUORUM endpoints answered:
	// nothing is read on the word of fewer.
	ErrQuorumUnavailable = errors.New("fewer endpoints answered than the quorum needs")
	// ErrQuorumDisagreement means the endpoints gave different answers for
	// the same range and no answer had the quorum.
	ErrQuorumDisagreement = errors.New("endpoints disagree and no answer has the quorum")
)

// QuorumObserver hears of endpoints whose answer differed from the one
// with the quorum (or, when none had it, from the most common one).
// poller.Metrics is the real one.
type QuorumObserver interface {
	Disagreement(endpoint string)
}

// quorumTarget is the target at least Quorum distinct endpoints prove: the
// Quorum-th highest of their targets. Ready endpoints are asked first, then
// cooling ones, until Quorum have answered.
func (e *Endpoints) quorumTarget(ctx context.Context) (Target, error) {
	k := e.cfg.Quorum
	var targets []int64
	lastErr := failover[int64]{
		call: func(ctx context.Context, ep *endpoint) (int64, error) {
			return ep.c.Target(ctx, e.cfg.Finality, e.cfg.Confirmations)
		},
		take: func(_ *endpoint, t int64) bool {
			targets = append(targets, t)
			return len(targets) >= k
		},
	}.run(ctx, e)
	if lastErr != nil && ctx.Err() != nil {
		return Target{}, lastErr // the caller gave up: no endpoint's fault
	}
	if len(targets) < k {
		state := fmt.Errorf("waiting for quorum: %d of %d endpoints answering", len(targets), k)
		e.mu.Lock()
		e.quorumWait = state
		e.mu.Unlock()
		return Target{}, fmt.Errorf("%w: %d of RPC_QUORUM=%d endpoints answered: %w", ErrQuorumUnavailable, len(targets), k, lastErr)
	}
	slices.Sort(targets)
	t := targets[0] // the lowest of k: every one of them proves it
	e.mu.Lock()
	defer e.mu.Unlock()
	e.quorumWait = nil
	e.highest = max(e.highest, targets[len(targets)-1])
	return Target{Block: t, Highest: e.highest}, nil
}

// answer is one endpoint's reply for a range and its fingerprint.
type answer struct {
	ep  *endpoint
	r   Range
	sum string
}

// quorumRange reads [from, at most maxTo] from distinct endpoints until
// Quorum of them give the same answer: the same end blocks and hashes, and
// the same burns and rejected logs with the same data and block hashes.
// The range is the shortest any of them would serve (their learned limits
// differ); an endpoint that served a longer one is asked again. Endpoints
// whose answer differs from the one with the quorum are demoted (a bad
// reply: they cool down) and counted. When no answer has the quorum,
// nothing is returned: ErrQuorumDisagreement when enough endpoints answered
// but differently (each answer is logged), ErrQuorumUnavailable when too few
// answered.
func (e *Endpoints) quorumRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (Range, error) {
	k := e.cfg.Quorum
	to := maxTo
	var (
		answers []answer
		asked   []*endpoint // asked for [from, to] as it stands
		lastErr error
	)
	for {
		if i, ok := agreed(answers, k); ok {
			e.dissent(answers, answers[i].sum, from, to)
			e.mu.Lock()
			e.activate(answers[i].ep)
			e.quorumSplit, e.hasGap = nil, false
			e.mu.Unlock()
			return answers[i].r, nil
		}
		ep, _, err := e.pick(ctx, append(slices.Clone(asked), e.prunedFor(from)...))
		if err != nil {
			if lastErr == nil {
				lastErr = err
			}
			break
		}
		asked = append(asked, ep)
		r, err := e.burnRange(ctx, ep, contracts, from, to)
		if err != nil {
			if ctx.Err() != nil {
				return Range{}, err
			}
			lastErr = err
			continue
		}
		if r.To.Number < to {
			// This endpoint serves less: the others answer again for it.
			to = r.To.Number
			answers = answers[:0]
			asked = []*endpoint{ep}
		}
		answers = append(answers, answer{ep: ep, r: r, sum: fingerprint(r)})
	}
	if len(answers) < k {
		if len(answers) == 0 && e.anyPrunedFor(from) {
			return Range{}, e.historyGap(from, lastErr)
		}
		state := fmt.Errorf("waiting for quorum: %d of %d endpoints answering", len(answers), k)
		e.mu.Lock()
		e.quorumWait = state
		e.mu.Unlock()
		return Range{}, fmt.Errorf("%w: blocks [%d, %d]: %d of RPC_QUORUM=%d endpoints answered: %w", ErrQuorumUnavailable, from, to, len(answers), k, lastErr)
	}
	// Enough answers, none with the quorum: the most common one stands for
	// the chain when the counts tell, and every answer is logged.
	counts := map[string]int{}
	best := ""
	for _, a := range answers {
		counts[a.sum]++
		if counts[a.sum] > counts[best] {
			best = a.sum
		}
	}
	tie := 0
	for _, n := range counts {
		if n == counts[best] {
			tie++
		}
	}
	if tie > 1 {
		best = "" // nobody is the majority: every endpoint dissents
	}
	e.dissent(answers, best, from, to)
	e.mu.Lock()
	e.quorumSplit = fmt.Errorf("quorum not reached: endpoints disagree on blocks [%d, %d]", from, to)
	e.mu.Unlock()
	return Range{}, &Error{Class: ClassBadReply, Endpoint: e.String(), Method: "eth_getLogs",
		Err: fmt.Errorf("%w: blocks [%d, %d]: %d endpoints answered, no %d of them alike", ErrQuorumDisagreement, from, to, len(answers), k)}
}

// agreed returns the index of an answer that k answers share.
func agreed(answers []answer, k int) (int, bool) {
	for i, a := range answers {
		n := 0
		for _, b := range answers {
			if b.sum == a.sum {
				n++
			}
		}
		if n >= k {
			return i, true
		}
	}
	return 0, false
}

// dissent logs, counts and demotes every endpoint whose answer is not want
// ("" when none stands: all of them).
func (e *Endpoints) dissent(answers []answer, want string, from, to uint64) {
	var ref *answer
	for i := range answers {
		if answers[i].sum == want {
			ref = &answers[i]
			break
		}
	}
	if ref == nil && len(answers) > 0 {
		ref = &answers[0]
	}
	for _, a := range answers {
		if a.sum == want {
			continue
		}
		only, missing := diffBurns(a.r, ref.r)
		e.log.Error("endpoints disagree on a range; the dissenting answer is not used",
			slog.String("endpoint", a.ep.c.String()), slog.String("answer", describeRange(a.r)),
			slog.String("other_endpoint", ref.ep.c.String()), slog.String("other_answer", describeRange(ref.r)),
			slog.String("only_in_this", only), slog.String("missing_here", missing),
			slog.Uint64("from", from), slog.Uint64("to", to))
		if qo, ok := e.obs.(QuorumObserver); ok {
			qo.Disagreement(a.ep.c.String())
		}
		e.fail(context.Background(), a.ep, a.ep.c.badReply("eth_getLogs",
			fmt.Errorf("%w: its answer for blocks [%d, %d] differs from another endpoint's", ErrBadReply, from, to)))
	}
}

// describeRange summarises a range for a log line: end blocks and hashes,
// counts and fingerprint. Nothing in it is secret.
func describeRange(r Range) string {
	return fmt.Sprintf("blocks %d (%s) to %d (%s), %d burns, %d rejected, %d hidden, fingerprint %s",
		r.From.Number, r.From.Hash.Hex(), r.To.Number, r.To.Hash.Hex(), len(r.Burns), len(r.Rejected), r.Hidden, fingerprint(r)[:16])
}

// diffBurns names (up to five each) the burns only in a, and those only in
// b, as tx:index@block amount.
func diffBurns(a, b Range) (onlyA, onlyB string) {
	key := func(x Burn) string {
		return fmt.Sprintf("%s:%d@%d/%s amount %s payer %s", x.TxHash.Hex(), x.LogIndex, x.BlockNumber, x.BlockHash.Hex()[:10], x.Amount, x.Payer.Hex())
	}
	set := func(r Range) map[string]bool {
		m := map[string]bool{}
		for _, x := range r.Burns {
			m[key(x)] = true
		}
		return m
	}
	sa, sb := set(a), set(b)
	list := func(from, other map[string]bool) string {
		var out []string
		for k := range from {
			if !other[k] {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		if len(out) > 5 {
			out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
		}
		return strings.Join(out, ", ")
	}
	return list(sa, sb), list(sb, sa)
}

// quorumHeaders reads the headers of blocks ns from distinct endpoints
// until Quorum of them give the same hashes (and parents): every canonical
// hash a writer decides on (the ledger check, a cursor reset, a seeded
// cursor) then has the quorum's word, not one endpoint's. Endpoints that
// answer otherwise are demoted like a dissenting range.
func (e *Endpoints) quorumHeaders(ctx context.Context, ns []uint64) (map[uint64]Header, error) {
	k := e.cfg.Quorum
	type reply struct {
		ep  *endpoint
		hs  map[uint64]Header
		sum string
	}
	var (
		replies []reply
		agreedI = -1
	)
	digest := func(hs map[uint64]Header) string {
		h := sha256.New()
		for _, n := range ns {
			x := hs[n]
			h.Write(x.Hash[:])
			h.Write(x.ParentHash[:])
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	lastErr := failover[map[uint64]Header]{
		call: func(ctx context.Context, ep *endpoint) (map[uint64]Header, error) {
			return ep.c.HeadersByNumber(ctx, ns)
		},
		take: func(ep *endpoint, hs map[uint64]Header) bool {
			replies = append(replies, reply{ep: ep, hs: hs, sum: digest(hs)})
			i, ok := agreedOn(replies, func(r reply) string { return r.sum }, k)
			agreedI = i
			return ok
		},
	}.run(ctx, e)
	if lastErr == nil {
		for _, o := range replies {
			if o.sum != replies[agreedI].sum {
				e.dissentHeaders(o.ep, replies[agreedI].ep)
			}
		}
		return replies[agreedI].hs, nil
	}
	if ctx.Err() != nil {
		return nil, lastErr
	}
	if len(replies) < k {
		return nil, fmt.Errorf("%w: headers: %d of RPC_QUORUM=%d endpoints answered: %w", ErrQuorumUnavailable, len(replies), k, lastErr)
	}
	return nil, &Error{Class: ClassBadReply, Endpoint: e.String(), Method: "eth_getBlockByNumber",
		Err: fmt.Errorf("%w: block hashes: %d endpoints answered, no %d of them alike", ErrQuorumDisagreement, len(replies), k)}
}

// agreedOn returns the index of an item that k items share by sum.
func agreedOn[T any](items []T, sum func(T) string, k int) (int, bool) {
	counts := map[string]int{}
	for i, it := range items {
		counts[sum(it)]++
		if counts[sum(it)] >= k {
			return i, true
		}
	}
	return 0, false
}

// dissentHeaders logs, counts and demotes an endpoint whose block hashes
// differ from the quorum's (other's).
func (e *Endpoints) dissentHeaders(ep, other *endpoint) {
	if qo, ok := e.obs.(QuorumObserver); ok {
		qo.Disagreement(ep.c.String())
	}
	e.log.Error("endpoints disagree on block hashes; the dissenting answer is not used",
		slog.String("endpoint", ep.c.String()), slog.String("other_endpoint", other.c.String()))
	e.fail(context.Background(), ep, ep.c.badReply("eth_getBlockByNumber",
		fmt.Errorf("%w: its block hashes differ from the quorum's", ErrBadReply)))
}

// fingerprint digests what a quorum compares: the end blocks, their hashes
// and the first block's parent (the continuity a writer checks), every burn (position, block hash, contract, payer, digest, amount,
// timestamp) and every rejected log (position, block hash, address,
// topics, data), in chain order.
func fingerprint(r Range) string {
	h := sha256.New()
	num := func(n uint64) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], n)
		h.Write(b[:])
	}
	num(r.From.Number)
	h.Write(r.From.Hash[:])
	h.Write(r.From.ParentHash[:])
	num(r.To.Number)
	h.Write(r.To.Hash[:])
	burns := slices.Clone(r.Burns)
	sortBurns(burns)
	for _, x := range burns {
		num(x.BlockNumber)
		num(uint64(x.LogIndex))
		h.Write(x.BlockHash[:])
		h.Write(x.TxHash[:])
		h.Write(x.Contract[:])
		h.Write(x.Payer[:])
		h.Write(x.Digest[:])
		amount := x.Amount.Bytes()
		num(uint64(len(amount)))
		h.Write(amount)
		num(uint64(x.Timestamp))
	}
	rejected := slices.Clone(r.Rejected)
	slices.SortFunc(rejected, func(a, b Rejected) int {
		return cmp.Or(cmp.Compare(a.Log.BlockNumber, b.Log.BlockNumber), cmp.Compare(a.Log.Index, b.Log.Index))
	})
	h.Write([]byte{0xff})
	for _, x := range rejected {
		l := x.Log
		num(l.BlockNumber)
		num(uint64(l.Index))
		h.Write(l.BlockHash[:])
		h.Write(l.TxHash[:])
		h.Write(l.Address[:])
		num(uint64(len(l.Topics)))
		for _, t := range l.Topics {
			h.Write(t[:])
		}
		num(uint64(len(l.Data)))
		h.Write(l.Data)
	}
	return hex.EncodeToString(h.Sum(nil))
}
