// Package devchain runs a real go-ethereum node in-process (the simulated
// backend) serving HTTP JSON-RPC, with the test token, the BurnWithDigest
// contract and the BatchBurner deployed and funded payer accounts. It backs
// cmd/devchain and the tests.
package devchain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"

	"github.com/burnpoller/burnpoller/contracts/bindings"
)

// Config describes a dev chain.
type Config struct {
	// Addr is the host:port JSON-RPC listens on; port 0 picks a free port.
	Addr string
	// BlockTime seals a block this often; zero seals only on Seal.
	BlockTime time.Duration
	// ChainID defaults to 1337.
	ChainID uint64
	// Payers is the number of funded payer accounts; zero means 8. Payer
	// keys are random on every start.
	Payers int
	// DeployerKey deploys the contracts; nil means DefaultDeployerKey, which
	// puts the contracts at the same addresses on every start.
	DeployerKey *ecdsa.PrivateKey
	// Log receives the chain's own messages; nil discards them.
	Log *slog.Logger
	// ReorgEvery, if set, replaces the last ReorgDepth blocks (above the
	// finalized block) with a new branch this often (see Chain.Reorg).
	ReorgEvery time.Duration
	ReorgDepth uint64
	// DataDir, if set, keeps the chain in a database on disk there rather
	// than in memory. Long chains need it: past the finalized block
	// go-ethereum's freezer scans the whole in-memory database for each
	// block it freezes, so sealing slows to a crawl (17 blocks/s at 72,000
	// blocks), where on disk it stays about 1,000 blocks/s.
	DataDir string
	// GasLimit is the block gas limit; zero keeps go-ethereum's default
	// (the miner's gas ceiling). A block of thousands of burns needs more,
	// and more time to build than the miner's 2 s allowance on a loaded
	// machine (it would seal what it executed by then): with GasLimit set,
	// the allowance is a minute.
	GasLimit uint64
}

// Info is what a client needs to use the chain; cmd/devchain prints it.
type Info struct {
	RPCURL       string         `json:"rpc_url"`
	WSURL        string         `json:"ws_url"`
	ChainID      uint64         `json:"chain_id"`
	Token        common.Address `json:"token"`
	BurnContract common.Address `json:"burn_contract"`
	BatchBurner  common.Address `json:"batch_burner"`
	PayerKeys    []string       `json:"payer_keys"`
}

// Chain is a running dev chain.
type Chain struct {
	info    Info
	backend *simulated.Backend
	client  simulated.Client
	chainID *big.Int
	log     *slog.Logger

	sealMu sync.Mutex // serialises sealing with forks and rollbacks

	deployer *Sender
	*Sender  // the payers

	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

// DefaultDeployerKey is a fixed, publicly known key: with it the token, the
// burn contract and the batch burner are always at the same addresses
// (deployer nonces 0, 1 and 2), which docker-compose.yml relies on. Never use
// it on a real chain.
func DefaultDeployerKey() *ecdsa.PrivateKey {
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte("burnpoller devchain deployer")))
	if err != nil {
		panic(err)
	}
	return key
}

// PayerFunds is how many token units each payer starts with.
var PayerFunds = new(big.Int).Exp(big.NewInt(10), big.NewInt(40), nil)

// Start launches the chain, deploys the contracts, funds the payers and,
// if cfg.BlockTime is set, starts sealing blocks.
func Start(ctx context.Context, cfg Config) (*Chain, error) {
	if cfg.ChainID == 0 {
		cfg.ChainID = 1337
	}
	if cfg.Payers <= 0 {
		cfg.Payers = 8
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8545"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	host, port, err := listenAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}

	deployer := cfg.DeployerKey
	if deployer == nil {
		deployer = DefaultDeployerKey()
	}
	alloc := types.GenesisAlloc{crypto.PubkeyToAddress(deployer.PublicKey): {Balance: ether(1_000_000)}}
	payers := make([]*ecdsa.PrivateKey, cfg.Payers)
	keys := make([]string, cfg.Payers)
	for i := range payers {
		if payers[i], err = crypto.GenerateKey(); err != nil {
			return nil, err
		}
		alloc[crypto.PubkeyToAddress(payers[i].PublicKey)] = types.Account{Balance: ether(1_000_000)}
		keys[i] = hexutil.Encode(crypto.FromECDSA(payers[i]))
	}

	chainID := new(big.Int).SetUint64(cfg.ChainID)
	backend := simulated.NewBackend(alloc, func(nc *node.Config, ec *ethconfig.Config) {
		nc.DataDir = cfg.DataDir
		nc.HTTPHost = host
		nc.HTTPPort = port
		nc.HTTPModules = []string{"eth", "net", "web3"}
		nc.HTTPVirtualHosts = []string{"*"} // reachable by any name, e.g. a compose service
		// WebSocket on the same port, for newHeads subscriptions.
		nc.WSHost, nc.WSPort = host, port
		nc.WSModules = []string{"eth"}
		nc.WSOrigins = []string{"*"}
		chainCfg := *params.AllDevChainProtocolChanges
		chainCfg.ChainID = chainID
		ec.Genesis.Config = &chainCfg
		ec.NetworkId = cfg.ChainID
		if cfg.GasLimit > 0 {
			ec.Genesis.GasLimit, ec.Miner.GasCeil = cfg.GasLimit, cfg.GasLimit
			ec.Miner.Recommit = time.Minute
		}
	})
	c := &Chain{
		info: Info{
			RPCURL:    "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
			WSURL:     "ws://" + net.JoinHostPort(host, strconv.Itoa(port)),
			ChainID:   cfg.ChainID,
			PayerKeys: keys,
		},
		backend:  backend,
		client:   backend.Client(),
		chainID:  chainID,
		log:      cfg.Log,
		deployer: newSender(backend.Client(), chainID, []*ecdsa.PrivateKey{deployer}),
		Sender:   newSender(backend.Client(), chainID, payers),
		stop:     make(chan struct{}),
	}
	if err := c.deploy(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("deploying contracts: %w", err), backend.Close())
	}
	if cfg.BlockTime > 0 {
		c.wg.Add(1)
		go c.sealEvery(cfg.BlockTime)
	}
	if cfg.ReorgEvery > 0 && cfg.ReorgDepth > 0 {
		c.wg.Add(1)
		go c.reorgEvery(cfg.ReorgEvery, cfg.ReorgDepth)
	}
	return c, nil
}

// Info describes the chain.
func (c *Chain) Info() Info { return c.info }

// Client is an in-process client of the node.
func (c *Chain) Client() simulated.Client { return c.client }

// Seal seals the pending transactions into a new block and returns its hash.
func (c *Chain) Seal() common.Hash {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	return c.backend.Commit()
}

// WithBackend runs f with sealing paused, for forks and rollbacks.
func (c *Chain) WithBackend(f func(*simulated.Backend) error) error {
	c.sealMu.Lock()
	defer c.sealMu.Unlock()
	return f(c.backend)
}

// StartTraffic sends rate random burns per second from random payers until
// Close; about one in five is a BatchBurner transaction with two burns.
func (c *Chain) StartTraffic(rate float64) {
	if rate <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		defer cancel()
		<-c.stop
	}()
	go func() {
		defer c.wg.Done()
		c.Traffic(ctx, rate, func(err error) { c.log.Warn("sending burn failed", slog.Any("err", err)) })
	}()
}

// Close stops sealing and traffic and shuts the node down.
func (c *Chain) Close() error {
	var err error
	c.stopped.Do(func() {
		close(c.stop)
		c.wg.Wait()
		c.sealMu.Lock()
		defer c.sealMu.Unlock()
		err = c.backend.Close()
	})
	return err
}

func (c *Chain) sealEvery(d time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.Seal()
		}
	}
}

func (c *Chain) deploy(ctx context.Context) error {
	var (
		txs                           []*types.Transaction
		tokenAddr, burnAddr, batchAdr common.Address
		token                         *bindings.TestToken
	)
	type step struct {
		name   string
		sender *Sender
		who    int
		gas    uint64
		f      func(*bind.TransactOpts) (*types.Transaction, error)
	}
	steps := []step{
		{"deploying token", c.deployer, 0, 3_000_000, func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
			tokenAddr, tx, token, err = bindings.DeployTestToken(o, c.client)
			return tx, err
		}},
		{"deploying burn contract", c.deployer, 0, 3_000_000, func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
			burnAddr, tx, _, err = bindings.DeployBurnWithDigest(o, c.client, tokenAddr)
			return tx, err
		}},
		{"deploying batch burner", c.deployer, 0, 3_000_000, func(o *bind.TransactOpts) (tx *types.Transaction, err error) {
			batchAdr, tx, _, err = bindings.DeployBatchBurner(o, c.client, tokenAddr, burnAddr)
			return tx, err
		}},
	}
	maxUint := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	for i := range c.Payers() {
		addr := c.Payer(i)
		steps = append(steps, step{"minting", c.deployer, 0, 300_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
			return token.Mint(o, addr, PayerFunds)
		}})
		for _, spender := range []*common.Address{&burnAddr, &batchAdr} {
			steps = append(steps, step{"approving", c.Sender, i, 300_000, func(o *bind.TransactOpts) (*types.Transaction, error) {
				return token.Approve(o, *spender, maxUint)
			}})
		}
	}
	for _, s := range steps {
		tx, err := s.sender.Transact(ctx, s.who, s.gas, s.f)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		txs = append(txs, tx)
	}
	// The pool may admit transactions after a seal has started, so seal
	// until every one is in a block.
	for _, tx := range txs {
		for {
			c.Seal()
			r, err := c.client.TransactionReceipt(ctx, tx.Hash())
			if err == nil {
				if r.Status != types.ReceiptStatusSuccessful {
					return fmt.Errorf("transaction %s reverted", tx.Hash().Hex())
				}
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for transaction %s: %w", tx.Hash().Hex(), ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.info.Token, c.info.BurnContract, c.info.BatchBurner = tokenAddr, burnAddr, batchAdr
	return c.use(burnAddr, batchAdr)
}

func listenAddr(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: bad port", addr)
	}
	if port == 0 {
		// The node does not report the port it bound, so find a free one first.
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", 0, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	return host, port, nil
}

func ether(n int64) *big.Int {
	return new(big.Int).Mul(big.NewInt(n), big.NewInt(params.Ether))
}
