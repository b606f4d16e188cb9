package devchain

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/burnpoller/burnpoller/contracts/bindings"
)

// Backend is what a Sender needs of a node client: *ethclient.Client and
// the simulated backend's client both fit.
type Backend interface {
	bind.ContractBackend
	bind.DeployBackend
}

// Sender sends burns from a set of funded keys to any node running the
// contracts, in-process or over JSON-RPC. It is safe for concurrent use.
type Sender struct {
	client  Backend
	chainID *big.Int
	keys    []*ecdsa.PrivateKey
	burner  *bindings.BurnWithDigest
	batch   *bindings.BatchBurner

	mu     sync.Mutex // serialises sends and guards nonces
	nonces map[common.Address]uint64
}

// NewSender returns a sender for the chain info describes, using its payer keys.
func NewSender(client Backend, info Info) (*Sender, error) {
	keys := make([]*ecdsa.PrivateKey, len(info.PayerKeys))
	for i, k := range info.PayerKeys {
		key, err := crypto.HexToECDSA(trim0x(k))
		if err != nil {
			return nil, fmt.Errorf("payer key %d: %w", i, err)
		}
		keys[i] = key
	}
	s := newSender(client, new(big.Int).SetUint64(info.ChainID), keys)
	if err := s.use(info.BurnContract, info.BatchBurner); err != nil {
		return nil, err
	}
	return s, nil
}

func newSender(client Backend, chainID *big.Int, keys []*ecdsa.PrivateKey) *Sender {
	return &Sender{client: client, chainID: chainID, keys: keys, nonces: make(map[common.Address]uint64)}
}

func (s *Sender) use(burner, batch common.Address) (err error) {
	if s.burner, err = bindings.NewBurnWithDigest(burner, s.client); err != nil {
		return err
	}
	s.batch, err = bindings.NewBatchBurner(batch, s.client)
	return err
}

// Payers is the number of payer keys.
func (s *Sender) Payers() int { return len(s.keys) }

// Payer returns payer i's address.
func (s *Sender) Payer(i int) common.Address { return crypto.PubkeyToAddress(s.keys[i].PublicKey) }

// Transact sends one transaction from payer i with a fixed gas limit. The
// sender tracks nonces itself, because a node's pending nonce lags behind
// transactions sent in quick succession.
func (s *Sender) Transact(ctx context.Context, payer int, gas uint64, f func(*bind.TransactOpts) (*types.Transaction, error)) (*types.Transaction, error) {
	if payer < 0 || payer >= len(s.keys) {
		return nil, fmt.Errorf("no payer %d (have %d)", payer, len(s.keys))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.keys[payer]
	addr := crypto.PubkeyToAddress(key.PublicKey)
	nonce, ok := s.nonces[addr]
	if !ok {
		var err error
		if nonce, err = s.client.PendingNonceAt(ctx, addr); err != nil {
			return nil, fmt.Errorf("reading nonce of %s: %w", addr.Hex(), err)
		}
	}
	o := bind.NewKeyedTransactor(key, s.chainID)
	o.Context = ctx
	o.Nonce = new(big.Int).SetUint64(nonce)
	o.GasLimit = gas // fixed limits skip estimation, which races with pending state
	tx, err := f(o)
	if err != nil {
		// The nonce may be out of step (a dropped transaction): re-read it next time.
		delete(s.nonces, addr)
		return nil, err
	}
	s.nonces[addr] = nonce + 1
	return tx, nil
}

// ResetNonces forgets the tracked nonces, which a reorganisation may have
// made wrong; the next send from each payer reads its nonce from the node.
func (s *Sender) ResetNonces() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.nonces)
}

// Burn sends burnWithDigest(amount, digest) from payer i.
func (s *Sender) Burn(ctx context.Context, payer int, amount *big.Int, digest common.Hash) (*types.Transaction, error) {
	return s.Transact(ctx, payer, 300_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return s.burner.BurnWithDigest(o, amount, digest)
	})
}

// BurnTwice sends one transaction from payer i, through the BatchBurner,
// that emits two burn logs.
func (s *Sender) BurnTwice(ctx context.Context, payer int, a1 *big.Int, d1 common.Hash, a2 *big.Int, d2 common.Hash) (*types.Transaction, error) {
	return s.Transact(ctx, payer, 800_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return s.batch.BurnTwice(o, a1, d1, a2, d2)
	})
}

// BurnMany sends one transaction from payer i emitting one burn log per
// (amount, digest) pair.
func (s *Sender) BurnMany(ctx context.Context, payer int, amounts []*big.Int, digests [][32]byte) (*types.Transaction, error) {
	gas := uint64(200_000 + 30_000*len(amounts))
	return s.Transact(ctx, payer, gas, func(o *bind.TransactOpts) (*types.Transaction, error) {
		return s.batch.BurnMany(o, amounts, digests)
	})
}

// WaitMined waits until tx is in a block and fails if it reverted.
func (s *Sender) WaitMined(ctx context.Context, tx *types.Transaction) (*types.Receipt, error) {
	r, err := bind.WaitMined(ctx, s.client, tx.Hash())
	if err != nil {
		return nil, err
	}
	if r.Status != types.ReceiptStatusSuccessful {
		return r, fmt.Errorf("transaction %s reverted", tx.Hash().Hex())
	}
	return r, nil
}

// Traffic sends rate random burns per second from random payers until ctx
// ends and returns how many transactions it sent; about one in five is a
// BatchBurner transaction with two burns. Failed sends go to onErr.
func (s *Sender) Traffic(ctx context.Context, rate float64, onErr func(error)) int {
	if rate <= 0 {
		<-ctx.Done()
		return 0
	}
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer t.Stop()
	sent := 0
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return sent
		case <-t.C:
		}
		payer := mrand.IntN(len(s.keys))
		var err error
		if n%5 == 4 {
			_, err = s.BurnTwice(ctx, payer, RandomAmount(), RandomDigest(), RandomAmount(), RandomDigest())
		} else {
			_, err = s.Burn(ctx, payer, RandomAmount(), RandomDigest())
		}
		switch {
		case err == nil:
			sent++
		case onErr != nil && !errors.Is(err, context.Canceled):
			onErr(err)
		}
	}
}

// RandomAmount returns an amount between 1 and 10^12 units (a million tokens).
func RandomAmount() *big.Int {
	return big.NewInt(1 + mrand.Int64N(1_000_000_000_000))
}

// RandomDigest returns a random non-zero digest.
func RandomDigest() common.Hash {
	var d common.Hash
	for d == (common.Hash{}) {
		_, _ = rand.Read(d[:])
	}
	return d
}

func trim0x(s string) string {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return s[2:]
	}
	return s
}
