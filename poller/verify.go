package poller

import (
	"context"
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/payments"
)

// Discrepancy kinds.
const (
	// Missing: a burn on the canonical chain with no payment.
	Missing = "missing"
	// Extra: a payment with no such burn on the canonical chain.
	Extra = "extra"
	// Mismatched: a payment whose burn is on the chain with other values.
	Mismatched = "mismatched"
)

// Discrepancy is one difference between the chain and the ledger.
type Discrepancy struct {
	Kind     string `json:"kind"`
	TxHash   string `json:"tx_hash"`
	LogIndex uint32 `json:"log_index"`
	Block    int64  `json:"block_number"`
	// Fields names what differs, for Mismatched.
	Fields []string `json:"fields,omitempty"`
	// Chain and Ledger are the two sides (nil where absent).
	Chain  *VerifiedPayment `json:"chain,omitempty"`
	Ledger *VerifiedPayment `json:"ledger,omitempty"`
}

// VerifiedPayment is one side of a Discrepancy.
type VerifiedPayment struct {
	ID int64 `json:"id,omitempty"`
	// Orphaned is set for a ledger row an operator's cursor reset marked
	// orphaned.
	Orphaned    bool   `json:"orphaned,omitempty"`
	BlockNumber int64  `json:"block_number"`
	BlockHash   string `json:"block_hash"`
	Payer       string `json:"payer"`
	Digest      string `json:"digest"`
	Amount      string `json:"amount"`
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	From       int64 `json:"from"`
	To         int64 `json:"to"`
	ChainBurns int   `json:"chain_burns"`
	LedgerRows int   `json:"ledger_rows"`
	Missing    int   `json:"missing"`
	Extra      int   `json:"extra"`
	Mismatched int   `json:"mismatched"`
	// Orphaned counts ledger rows marked orphaned at a cursor reset: known
	// to be off the chain, awaiting the business's reconciliation, and not
	// counted as discrepancies (nor in LedgerRows).
	Orphaned      int           `json:"orphaned"`
	Undecodable   int           `json:"undecodable_on_chain"`
	Discrepancies []Discrepancy `json:"discrepancies"`
}

// Clean reports whether chain and ledger agree.
func (r VerifyReport) Clean() bool { return r.Missing+r.Extra+r.Mismatched == 0 }

type key = payments.Key

// VerifierNode is what Verify reads from the chain; *chain.Endpoints is
// the real one.
type VerifierNode interface {
	Target(ctx context.Context) (chain.Target, error)
	BurnRange(ctx context.Context, contracts []common.Address, from, maxTo uint64) (chain.Range, error)
	// Span is how many blocks the next range should ask for.
	Span() uint64
}

// Verifier compares the chain's burns with the ledger. It only reads: it
// needs neither the loop's metrics nor its heartbeat.
type Verifier struct {
	store     *payments.Store
	node      VerifierNode
	chainID   uint64
	contracts []common.Address
}

// NewVerifier returns a verifier of the burns of contracts on chain chainID.
func NewVerifier(store *payments.Store, node VerifierNode, chainID uint64, contracts []common.Address) *Verifier {
	return &Verifier{store: store, node: node, chainID: chainID, contracts: contracts}
}

// Verify re-reads the burns of blocks [from, to] from the chain, chunk
// blocks at a time (at most), as writers read them (each range continuing
// the one before), and compares them with the payments table:
// burns with no payment, payments with no burn on the canonical chain, and
// payments whose amount, payer, digest, block number or block hash differ.
// Each key is reported once, whichever chunks its two sides fall in. to = -1
// means the finality target now.
func (v *Verifier) Verify(ctx context.Context, from, to int64, chunk uint64) (VerifyReport, error) {
	if chunk == 0 {
		chunk = 2000
	}
	if to < 0 {
		t, err := v.node.Target(ctx)
		if err != nil {
			return VerifyReport{}, fmt.Errorf("reading the target: %w", err)
		}
		to = t.Block
	}
	rep := VerifyReport{From: from, To: to, Discrepancies: []Discrepancy{}}
	vr := &verifyRun{v: v, rep: &rep, contracts: lowerHexes(v.contracts), explained: map[key]bool{}}
	// The ledger vouches for no block here: only the ranges' continuity
	// with each other is checked.
	ranges := newRangeReader(ctx, v.node, chunk, nil, readSpec{contracts: v.contracts, from: from, to: to,
		ledger: payments.Cursor{Block: -2}})
	defer ranges.Stop()
	for !ranges.Done() {
		r, err := ranges.Next(ctx)
		if err != nil {
			return rep, fmt.Errorf("reading burns: %w", err)
		}
		if err := vr.compareRange(ctx, r); err != nil {
			return rep, err
		}
	}
	for _, rec := range vr.unexplained {
		if !vr.explained[rec.Key()] {
			rep.add(Discrepancy{Kind: Extra, TxHash: rec.TxHash, LogIndex: rec.LogIndex, Block: rec.BlockNumber, Ledger: side(rec.Payment, rec.ID, false)})
		}
	}
	return rep, nil
}

// verifyRun is one Verify's state across its ranges: keys already
// accounted for as mismatched, and ledger rows the chain lacked in their
// own range: they are extra only if no later range finds their burn under
// another block.
type verifyRun struct {
	v           *Verifier
	rep         *VerifyReport
	contracts   []string
	explained   map[key]bool
	unexplained []payments.Recorded
}

// compareRange compares one range's canonical burns with the ledger's rows
// of its blocks.
func (vr *verifyRun) compareRange(ctx context.Context, r chain.Range) error {
	v, rep := vr.v, vr.rep
	next, end := ends(r)
	onChain, err := toPayments(v.chainID, r.Burns)
	if err != nil {
		return err
	}
	rep.ChainBurns += len(onChain)
	rep.Undecodable += len(r.Rejected)
	recorded, err := v.store.PaymentsInBlocks(ctx, v.chainID, vr.contracts, next, end)
	if err != nil {
		return err
	}
	// Orphaned rows are known to be off the chain; they are counted apart
	// and compared with nothing (a burn re-included under the same key has
	// a live row of its own).
	live := recorded[:0:0]
	for _, rec := range recorded {
		if rec.Orphaned {
			rep.Orphaned++
			continue
		}
		live = append(live, rec)
	}
	rep.LedgerRows += len(live)
	inLedger := make(map[key]payments.Recorded, len(live))
	for _, rec := range live {
		inLedger[rec.Key()] = rec
	}
	var lost []payments.Payment
	chainKeys := make(map[key]bool, len(onChain))
	for _, c := range onChain {
		k := c.Key()
		chainKeys[k] = true
		if rec, ok := inLedger[k]; ok {
			rep.compare(c, rec)
		} else {
			lost = append(lost, c)
		}
	}
	if err := vr.placeLost(ctx, lost); err != nil {
		return err
	}
	for _, rec := range live {
		if k := (rec.Key()); !chainKeys[k] && !vr.explained[k] {
			vr.unexplained = append(vr.unexplained, rec)
		}
	}
	return nil
}

// placeLost looks for burns missing from their blocks' rows under another
// block: compared there, else missing.
func (vr *verifyRun) placeLost(ctx context.Context, lost []payments.Payment) error {
	elsewhere, err := vr.v.byKey(ctx, lost)
	if err != nil {
		return err
	}
	for _, c := range lost {
		k := c.Key()
		if rec, ok := elsewhere[k]; ok {
			vr.explained[k] = true
			vr.rep.compare(c, rec)
			continue
		}
		vr.rep.add(Discrepancy{Kind: Missing, TxHash: c.TxHash, LogIndex: c.LogIndex, Block: c.BlockNumber, Chain: side(c, 0, false)})
	}
	return nil
}

func (v *Verifier) byKey(ctx context.Context, ps []payments.Payment) (map[key]payments.Recorded, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	ks := make([]payments.Key, len(ps))
	for i, c := range ps {
		ks[i] = c.Key()
	}
	recs, err := v.store.PaymentsByKey(ctx, v.chainID, ks)
	if err != nil {
		return nil, err
	}
	out := make(map[key]payments.Recorded, len(recs))
	for _, r := range recs {
		out[r.Key()] = r
	}
	return out, nil
}

// compare adds a Mismatched discrepancy when rec differs from c.
func (r *VerifyReport) compare(c payments.Payment, rec payments.Recorded) {
	var fields []string
	if c.Amount.Cmp(rec.Amount) != 0 {
		fields = append(fields, "amount")
	}
	if c.Payer != rec.Payer {
		fields = append(fields, "payer")
	}
	if c.Digest != rec.Digest {
		fields = append(fields, "digest")
	}
	if c.BlockNumber != rec.BlockNumber {
		fields = append(fields, "block_number")
	}
	if c.BlockHash != rec.BlockHash {
		fields = append(fields, "block_hash")
	}
	if c.Contract != rec.Contract || c.ChainID != rec.ChainID {
		fields = append(fields, "contract")
	}
	if len(fields) > 0 {
		r.add(Discrepancy{Kind: Mismatched, TxHash: c.TxHash, LogIndex: c.LogIndex, Block: c.BlockNumber,
			Fields: fields, Chain: side(c, 0, false), Ledger: side(rec.Payment, rec.ID, rec.Orphaned)})
	}
}

// maxListed caps the discrepancies listed; all are counted.
const maxListed = 1000

func (r *VerifyReport) add(d Discrepancy) {
	switch d.Kind {
	case Missing:
		r.Missing++
	case Extra:
		r.Extra++
	case Mismatched:
		r.Mismatched++
	}
	if len(r.Discrepancies) < maxListed {
		r.Discrepancies = append(r.Discrepancies, d)
	}
}

func side(p payments.Payment, id int64, orphaned bool) *VerifiedPayment {
	return &VerifiedPayment{ID: id, Orphaned: orphaned, BlockNumber: p.BlockNumber, BlockHash: p.BlockHash, Payer: p.Payer,
		Digest: p.Digest, Amount: p.Amount.String()}
}
