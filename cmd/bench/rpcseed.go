package main

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/burnpoller/burnpoller/contracts/bindings"
	"github.com/burnpoller/burnpoller/devchain"
)

// seeder fills a real node over JSON-RPC from its funded dev account: it
// deploys the token and, per burn contract, a BurnWithDigest and a
// BatchBurner, then seals blocks of burnMany transactions whose contents it
// controls (see block). Nonces are tracked here; nothing is estimated.
type seeder struct {
	n       *realNode
	from    common.Address
	signer  types.Signer
	nonce   uint64
	token   common.Address
	burnABI abi.ABI
}

// Fees of every seeding transaction: both nodes start at a base fee of
// 1 gwei, and blocks filled below half their gas limit lower it.
var (
	seedTip    = big.NewInt(1_000_000_000)
	seedFeeCap = big.NewInt(50_000_000_000)
)

// burnContracts is one burn contract and the BatchBurner that burns through
// it.
type burnContracts struct {
	burn, batch common.Address
}

// newSeeder deploys the token on n and mints the dev account enough for
// any run.
func newSeeder(ctx context.Context, n *realNode) (*seeder, error) {
	a, err := abi.JSON(strings.NewReader(bindings.BatchBurnerABI))
	if err != nil {
		return nil, err
	}
	s := &seeder{n: n, from: crypto.PubkeyToAddress(n.key.PublicKey), signer: types.LatestSignerForChainID(new(big.Int).SetUint64(n.chainID)), burnABI: a}
	if s.nonce, err = n.eth.PendingNonceAt(ctx, s.from); err != nil {
		return nil, err
	}
	var token *bindings.TestToken
	if err := s.one(ctx, "deploying the token", func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
		s.token, tx, token, err = bindings.DeployTestToken(o, n.eth)
		return tx, err
	}); err != nil {
		return nil, err
	}
	lots := new(big.Int).Lsh(big.NewInt(1), 250)
	return s, s.one(ctx, "minting", func(o *bind.TransactOpts) (*types.Transaction, error) { return token.Mint(o, s.from, lots) })
}

// deployBurner deploys a burn contract and its BatchBurner, and lets the
// BatchBurner spend the dev account's tokens.
func (s *seeder) deployBurner(ctx context.Context) (burnContracts, error) {
	var c burnContracts
	steps := []struct {
		name string
		f    func(*bind.TransactOpts) (*types.Transaction, error)
	}{
		{"deploying a burn contract", func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
			c.burn, tx, _, err = bindings.DeployBurnWithDigest(o, s.n.eth, s.token)
			return tx, err
		}},
		{"deploying a batch burner", func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
			c.batch, tx, _, err = bindings.DeployBatchBurner(o, s.n.eth, s.token, c.burn)
			return tx, err
		}},
		{"approving the batch burner", func(o *bind.TransactOpts) (*types.Transaction, error) {
			token, err := bindings.NewTestToken(s.token, s.n.eth)
			if err != nil {
				return nil, err
			}
			return token.Approve(o, c.batch, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)))
		}},
	}
	for _, st := range steps {
		if err := s.one(ctx, st.name, st.f); err != nil {
			return burnContracts{}, err
		}
	}
	return c, nil
}

// one sends the transaction f builds, seals it and waits for its receipt.
func (s *seeder) one(ctx context.Context, what string, f func(*bind.TransactOpts) (*types.Transaction, error)) error {
	o := s.opts(ctx, 5_000_000)
	tx, err := f(o)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.nonce++
	if err := s.n.seal(ctx); err != nil {
		return fmt.Errorf("%s: sealing: %w", what, err)
	}
	if _, err := s.receipt(ctx, tx.Hash()); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// opts are the transaction options of the next transaction: its nonce, a
// fixed gas limit and fixed fees, so that nothing asks the node first.
func (s *seeder) opts(ctx context.Context, gas uint64) *bind.TransactOpts {
	o := bind.NewKeyedTransactor(s.n.key, new(big.Int).SetUint64(s.n.chainID))
	o.Context, o.Nonce, o.GasLimit = ctx, new(big.Int).SetUint64(s.nonce), gas
	o.GasTipCap, o.GasFeeCap = seedTip, seedFeeCap
	return o
}

// burnTx signs, without sending, a burnMany of n random burns through
// batch with the next nonce.
func (s *seeder) burnTx(batch common.Address, n int) (*types.Transaction, error) {
	amounts := make([]*big.Int, n)
	digests := make([][32]byte, n)
	for i := range n {
		amounts[i] = devchain.RandomAmount()
		digests[i] = devchain.RandomDigest()
	}
	return s.burnManyTx(batch, amounts, digests)
}

// burnManyTx is one BatchBurner.burnMany transaction of these burns.
func (s *seeder) burnManyTx(batch common.Address, amounts []*big.Int, digests [][32]byte) (*types.Transaction, error) {
	n := len(amounts)
	data, err := s.burnABI.Pack("burnMany", amounts, digests)
	if err != nil {
		return nil, err
	}
	tx, err := types.SignNewTx(s.n.key, s.signer, &types.DynamicFeeTx{
		ChainID: new(big.Int).SetUint64(s.n.chainID), Nonce: s.nonce, GasTipCap: seedTip, GasFeeCap: seedFeeCap,
		// geth --dev's rules price a burnMany of one burn near 300,000 gas.
		Gas: uint64(400_000 + 30_000*n), To: &batch, Data: data,
	})
	if err != nil {
		return nil, err
	}
	s.nonce++
	return tx, nil
}

// block seals txs, which carry consecutive nonces, into one block and
// returns its number. geth --dev seals as soon as a transaction becomes
// executable: the later nonces go first (queued behind the gap), and the
// first nonce last makes them executable together, so one block takes
// them all. anvil seals them on evm_mine. A block that did not take them
// all is an error: the workload would not be what it says.
func (s *seeder) block(ctx context.Context, txs []*types.Transaction) (uint64, error) {
	order := append(append([]*types.Transaction{}, txs[1:]...), txs[0])
	elems := make([]rpc.BatchElem, len(order))
	for i, tx := range order {
		raw, err := tx.MarshalBinary()
		if err != nil {
			return 0, err
		}
		elems[i] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(raw)}, Result: new(common.Hash)}
	}
	if err := s.n.rpc.BatchCallContext(ctx, elems); err != nil {
		return 0, err
	}
	for _, el := range elems {
		if el.Error != nil {
			return 0, fmt.Errorf("sending a seeding transaction: %w", el.Error)
		}
	}
	if err := s.n.seal(ctx); err != nil {
		return 0, err
	}
	first, err := s.receipt(ctx, txs[0].Hash())
	if err != nil {
		return 0, err
	}
	last, err := s.receipt(ctx, txs[len(txs)-1].Hash())
	if err != nil {
		return 0, err
	}
	if first.BlockNumber.Cmp(last.BlockNumber) != 0 {
		return 0, fmt.Errorf("the node sealed a block's %d transactions into blocks %s to %s", len(txs), first.BlockNumber, last.BlockNumber)
	}
	return first.BlockNumber.Uint64(), nil
}

// emptyBlocks seals n blocks without a burn: anvil_mine on anvil, and on
// geth a transfer of nothing to the dev account itself per block.
func (s *seeder) emptyBlocks(ctx context.Context, n int) error {
	if s.n.kind == nodeAnvil {
		return s.n.rpc.CallContext(ctx, nil, "anvil_mine", hexutil.Uint64(n))
	}
	for range n {
		tx, err := types.SignNewTx(s.n.key, s.signer, &types.DynamicFeeTx{
			ChainID: new(big.Int).SetUint64(s.n.chainID), Nonce: s.nonce, GasTipCap: seedTip, GasFeeCap: seedFeeCap,
			Gas: 21_000, To: &s.from,
		})
		if err != nil {
			return err
		}
		s.nonce++
		if _, err := s.block(ctx, []*types.Transaction{tx}); err != nil {
			return err
		}
	}
	return nil
}

// receipt waits for tx's receipt and fails if the transaction reverted.
func (s *seeder) receipt(ctx context.Context, tx common.Hash) (*types.Receipt, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := s.n.eth.TransactionReceipt(ctx, tx)
		switch {
		case err == nil && r.Status != types.ReceiptStatusSuccessful:
			return nil, fmt.Errorf("transaction %s reverted", tx.Hex())
		case err == nil:
			return r, nil
		case !errors.Is(err, ethereum.NotFound) && !strings.Contains(err.Error(), "indexing is in progress"):
			// geth answers the latter while it indexes a fresh chain's
			// transactions: the receipt comes later.
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("transaction %s not sealed within a minute", tx.Hex())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// denseSeed is what seeding a dense workload made.
type denseSeed struct {
	Burns        int     `json:"burns"`
	PerTx        int     `json:"burns_per_tx"`
	TxsPerBlock  int     `json:"txs_per_block"`
	BurnBlocks   int     `json:"blocks_with_burns"`
	MinPerBlock  int     `json:"min_burns_per_block"`
	MedianBlock  int     `json:"median_burns_per_block"`
	MaxPerBlock  int     `json:"max_burns_per_block"`
	Head         uint64  `json:"head"`
	Finalized    uint64  `json:"finalized"`
	SeedSeconds  float64 `json:"seed_seconds"`
	blockNumbers []uint64
	perBlock     []int
}

// seedDense seals burns burns through the contracts, perTx per burnMany
// transaction and txsPerBlock transactions per block, the transactions of
// a block taken from the contracts in turn, then empty blocks until every
// burn is finalized. burns is per contract.
func (s *seeder) seedDense(ctx context.Context, contracts []burnContracts, burns, perTx, txsPerBlock int) (*denseSeed, error) {
	start := time.Now()
	left := make([]int, len(contracts))
	for i := range left {
		left[i] = burns
	}
	d := &denseSeed{Burns: burns * len(contracts), PerTx: perTx, TxsPerBlock: txsPerBlock}
	next := 0
	for total := d.Burns; total > 0; {
		var txs []*types.Transaction
		inBlock := 0
		for len(txs) < txsPerBlock && total > 0 {
			g := next % len(contracts)
			next++
			if left[g] == 0 {
				continue
			}
			n := min(perTx, left[g])
			tx, err := s.burnTx(contracts[g].batch, n)
			if err != nil {
				return nil, err
			}
			txs = append(txs, tx)
			left[g] -= n
			total -= n
			inBlock += n
		}
		if err := s.sealInto(ctx, d, txs, inBlock); err != nil {
			return nil, err
		}
	}
	return d, s.finish(ctx, d, start)
}

// sealInto seals txs, of burns burns, into one block and notes it in d.
func (s *seeder) sealInto(ctx context.Context, d *denseSeed, txs []*types.Transaction, burns int) error {
	b, err := s.block(ctx, txs)
	if err != nil {
		return err
	}
	d.blockNumbers = append(d.blockNumbers, b)
	d.perBlock = append(d.perBlock, burns)
	return nil
}

// finish seals empty blocks until the node finalizes the last block with
// burns, and fills in d's figures.
func (s *seeder) finish(ctx context.Context, d *denseSeed, start time.Time) error {
	d.BurnBlocks = len(d.blockNumbers)
	sorted := slices.Sorted(slices.Values(d.perBlock))
	d.MinPerBlock, d.MedianBlock, d.MaxPerBlock = sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1]
	last := d.blockNumbers[len(d.blockNumbers)-1]
	// geth --dev finalizes the last multiple of 32; anvil the head less two
	// epochs (of 4 slots here).
	for tries := 0; ; tries++ {
		if tries == 10 {
			return fmt.Errorf("the node's finalized block stays below block %d, the last with burns", last)
		}
		if err := s.emptyBlocks(ctx, 32); err != nil {
			return err
		}
		f, err := finalized(ctx, s.n.url)
		if err != nil {
			return err
		}
		if f >= last {
			d.Finalized = f
			break
		}
	}
	head, err := s.n.eth.BlockNumber(ctx)
	if err != nil {
		return err
	}
	d.Head = head
	d.SeedSeconds = time.Since(start).Seconds()
	return nil
}
