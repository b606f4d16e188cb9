package poller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/burnpoller/burnpoller/chain"
	testharness "github.com/burnpoller/burnpoller/internal/harness"
	"github.com/burnpoller/burnpoller/internal/pgtest"
	"github.com/burnpoller/burnpoller/payments"
	"github.com/burnpoller/burnpoller/poller"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func() error { return goleak.Find() })
}

var (
	burnContract = common.HexToAddress("0x00000000000000000000000000000000000000b1")
	// contractHex is burnContract as the ledger spells it.
	contractHex = "0x00000000000000000000000000000000000000b1"
)

func TestNextRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		cursor, target   int64
		maxRange         uint64
		wantFrom, wantTo int64
		wantOK           bool
	}{
		{"cursor at target", 10, 10, 5, 0, 0, false},
		{"cursor past target (lagging node)", 12, 10, 5, 0, 0, false},
		{"no target yet", -1, -1, 5, 0, 0, false},
		{"START_BLOCK=0, genesis only", -1, 0, 5, 0, 0, true},
		{"START_BLOCK=0, capped", -1, 100, 5, 0, 4, true},
		{"MAX_BLOCK_RANGE=1", 10, 20, 1, 11, 11, true},
		{"one block left", 19, 20, 1000, 20, 20, true},
		{"exactly max range", 10, 20, 10, 11, 20, true},
		{"one more than max range", 10, 21, 10, 11, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			from, to, ok := poller.NextRange(tt.cursor, tt.target, tt.maxRange)
			if ok != tt.wantOK || (ok && (from != tt.wantFrom || to != tt.wantTo)) {
				t.Fatalf("NextRange(%d, %d, %d) = %d, %d, %v; want %d, %d, %v",
					tt.cursor, tt.target, tt.maxRange, from, to, ok, tt.wantFrom, tt.wantTo, tt.wantOK)
			}
		})
	}
}

// fakeChain is a node at the RPC boundary: a canonical chain of blocks, each
// with its burns, whose hashes change when fork is bumped.
type fakeChain struct {
	mu      sync.Mutex
	target  int64
	head    int64    // the head; below target means the target is the head
	headErr error    // Head fails with it when set
	reorgs  []uint64 // blocks from which the chain was replaced, in order
	burns   map[uint64][]chain.Burn
	ranges  [][2]uint64
	failing int                                        // fail this many BurnRange calls
	failErr error                                      // the failure; nil means a plain error
	hook    func(ctx context.Context, from, to uint64) // runs inside BurnRange, lock held
	maxSpan uint64                                     // a provider limit: ranges end early
	hidden  map[uint64]bool                            // blocks whose burns the node leaves out
	rejects map[uint64][]chain.Rejected
	targets int // Target calls
	// targetErr, when set, fails Target (counted all the same).
	targetErr error
	// headersHook runs at the start of each Headers call, before the
	// chain's lock is taken.
	headersHook func(ns []uint64)
}

func newFakeChain(target int64) *fakeChain {
	return &fakeChain{target: target, burns: map[uint64][]chain.Burn{}, hidden: map[uint64]bool{}, rejects: map[uint64][]chain.Rejected{}}
}

// hash is block n's hash on the current chain: it changes with every reorg
// that replaced block n.
func (f *fakeChain) hash(n uint64) common.Hash {
	gen := uint64(0)
	for _, from := range f.reorgs {
		if n >= from {
			gen++
		}
	}
	return common.BigToHash(new(big.Int).SetUint64(n<<8 | gen + 1))
}

// reorg replaces every block from block from on: new hashes, and the burns
// of the dropped blocks are gone (a test adds the new branch's).
func (f *fakeChain) reorg(from uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reorgs = append(f.reorgs, from)
	for n := range f.burns {
		if n >= from {
			delete(f.burns, n)
		}
	}
}

func (f *fakeChain) setTarget(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = n
}

func (f *fakeChain) header(n uint64) chain.Header {
	var parent common.Hash
	if n > 0 {
		parent = f.hash(n - 1)
	}
	return chain.Header{Number: n, Hash: f.hash(n), ParentHash: parent}
}

func (f *fakeChain) addBurn(block uint64, tx byte, index uint, amount int64) chain.Burn {
	return f.addBurnTx(block, common.BytesToHash([]byte{tx, byte(block)}), tx, index, amount)
}

// addBurnOf adds a burn of another contract.
func (f *fakeChain) addBurnOf(contract common.Address, block uint64, tx byte, index uint, amount int64) chain.Burn {
	b := f.addBurn(block, tx, index, amount)
	f.mu.Lock()
	defer f.mu.Unlock()
	bs := f.burns[block]
	bs[len(bs)-1].Contract = contract
	b.Contract = contract
	return b
}

// unreorg undoes the last reorg: the blocks it replaced have their old
// hashes again (the chain came back to the branch it left); their burns are
// the test's to add again.
func (f *fakeChain) unreorg() {
	f.mu.Lock()
	defer f.mu.Unlock()
	from := f.reorgs[len(f.reorgs)-1]
	f.reorgs = f.reorgs[:len(f.reorgs)-1]
	for n := range f.burns {
		if n >= from {
			delete(f.burns, n)
		}
	}
}

// addBurnTx adds a burn of transaction txHash (the same transaction may be
// re-included in another block after a reorg).
func (f *fakeChain) addBurnTx(block uint64, txHash common.Hash, tx byte, index uint, amount int64) chain.Burn {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := chain.Burn{
		Contract:    burnContract,
		TxHash:      txHash,
		LogIndex:    index,
		BlockNumber: block,
		BlockHash:   f.hash(block),
		Payer:       common.BytesToAddress([]byte{tx}),
		Digest:      common.BytesToHash([]byte{0xd1, tx}),
		Amount:      big.NewInt(amount),
		Timestamp:   1_700_000_000 + int64(block),
	}
	f.burns[block] = append(f.burns[block], b)
	return b
}

func (f *fakeChain) Target(context.Context) (chain.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets++
	if f.targetErr != nil {
		return chain.Target{}, f.targetErr
	}
	return chain.Target{Block: f.target, Highest: f.target}, nil
}

func (f *fakeChain) BurnRange(ctx context.Context, contracts []common.Address, from, to uint64) (chain.Range, error) {
	f.mu.Lock()
	if f.maxSpan > 0 && to-from+1 > f.maxSpan {
		to = from + f.maxSpan - 1
	}
	f.ranges = append(f.ranges, [2]uint64{from, to})
	hook := f.hook
	if f.failing > 0 {
		f.failing--
		err := f.failErr
		if err == nil {
			err = errors.New("injected node failure")
		}
		f.mu.Unlock()
		return chain.Range{}, err
	}
	r := f.rangeOf(contracts, from, to)
	f.mu.Unlock()
	if hook != nil {
		hook(ctx, from, to)
	}
	return r, nil
}

// rangeOf is the node's answer for blocks [from, to]; f.mu is held.
func (f *fakeChain) rangeOf(contracts []common.Address, from, to uint64) chain.Range {
	r := chain.Range{From: f.header(from), To: f.header(to)}
	for n := from; n <= to; n++ {
		for _, b := range f.burns[n] {
			if !f.hidden[n] && slices.Contains(contracts, b.Contract) {
				r.Burns = append(r.Burns, b)
			}
		}
		r.Rejected = append(r.Rejected, f.rejects[n]...)
	}
	return r
}

func (f *fakeChain) HintDensity(uint64, int) {}

func (f *fakeChain) Span() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxSpan > 0 {
		return f.maxSpan
	}
	return math.MaxUint64
}

func (f *fakeChain) setHead(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head = n
}

func (f *fakeChain) Head(context.Context) (chain.Header, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.headErr != nil {
		return chain.Header{}, f.headErr
	}
	return f.header(uint64(max(f.head, f.target, 0))), nil
}

func (f *fakeChain) Headers(_ context.Context, ns []uint64) (map[uint64]chain.Header, error) {
	if f.headersHook != nil {
		f.headersHook(ns)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uint64]chain.Header, len(ns))
	for _, n := range ns {
		out[n] = f.header(n)
	}
	return out, nil
}

func (f *fakeChain) targetCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.targets
}

func (f *fakeChain) requested() [][2]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ranges)
}

type harness struct {
	t       *testing.T
	url     string
	pool    *pgxpool.Pool
	store   *payments.Store
	node    *fakeChain
	wcfg    poller.WriterConfig
	lcfg    poller.LoopConfig
	metrics *poller.Metrics
	log     *slog.Logger
}

func newHarness(t *testing.T, node *fakeChain) *harness {
	t.Helper()
	pool, url := pgtest.NewPool(t)
	return &harness{
		t:     t,
		url:   url,
		pool:  pool,
		store: payments.NewStore(pool),
		node:  node,
		wcfg: poller.WriterConfig{
			ChainID:       1337,
			Contracts:     []common.Address{burnContract},
			MaxBlockRange: 10,
			LockWait:      100 * time.Millisecond,
			TxTimeout:     5 * time.Second,
		},
		lcfg: poller.LoopConfig{
			CursorID:     "test",
			PollInterval: 20 * time.Millisecond,
			DrainTimeout: 2 * time.Second,
			MaxBackoff:   50 * time.Millisecond,
		},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// writer returns a writer on the harness's store and node, counting into
// fresh metrics (h.metrics).
func (h *harness) writer() *poller.Writer {
	h.metrics = poller.NewMetrics(prometheus.NewRegistry(), "test", "test", "test")
	return poller.NewWriter(h.wcfg, h.store, h.node, h.metrics, h.log)
}

// loop returns a live loop with its test signals on, not yet running.
func (h *harness) loop() *poller.Loop {
	l := poller.NewLoop(h.lcfg, h.writer(), h.metrics, poller.NewHeartbeat(), h.log)
	l.Signals.Committed.Init()
	l.Signals.Idle.Init()
	l.Signals.Standby.Init()
	l.Signals.Skipped.Init()
	l.Signals.Failed.Init()
	l.Signals.Latched.Init()
	l.Signals.Cleared.Init()
	l.Signals.Rescanned.Init()
	l.Signals.LatchChecked.Init()
	l.Signals.Stopping.Init()
	return l
}

// start runs a live loop until the returned stop is called; stop returns
// Run's error.
func (h *harness) start() (*poller.Loop, func() error) {
	h.t.Helper()
	l := h.loop()
	return l, h.run(l)
}

// run runs l until the returned stop is called.
func (h *harness) run(l *poller.Loop) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10s of cancel")
			}
		})
		return err
	}
	h.t.Cleanup(func() { _ = stop() })
	return stop
}

func (h *harness) cursor() payments.Cursor {
	h.t.Helper()
	return h.cursorOf(h.lcfg.CursorID)
}

func (h *harness) cursorOf(id string) payments.Cursor {
	h.t.Helper()
	c, err := h.store.Cursor(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func (h *harness) waitCursor(block int64) {
	h.t.Helper()
	waitFor(h.t, 10*time.Second, fmt.Sprintf("cursor at %d", block), func() bool {
		c, err := h.store.Cursor(context.Background(), h.lcfg.CursorID)
		return err == nil && c.Block == block
	})
}

// ledger returns "tx/index=amount@block" for every payment, sorted.
func (h *harness) ledger() []string {
	h.t.Helper()
	rows, err := h.pool.Query(context.Background(),
		`SELECT tx_hash, log_index, amount::text, block_number, block_hash, payer, digest FROM payments`)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tx, amount, blockHash, payer, digest string
		var index int
		var block int64
		if err := rows.Scan(&tx, &index, &amount, &block, &blockHash, &payer, &digest); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%d=%s@%d/%s/%s/%s", tx, index, amount, block, blockHash, payer, digest))
	}
	slices.Sort(out)
	return out
}

func expected(burns ...chain.Burn) []string {
	var out []string
	for _, b := range burns {
		out = append(out, fmt.Sprintf("%s/%d=%s@%d/%s/%s/%s", b.TxHash.Hex(), b.LogIndex, b.Amount, b.BlockNumber,
			b.BlockHash.Hex(), strings.ToLower(b.Payer.Hex()), b.Digest.Hex()))
	}
	slices.Sort(out)
	return out
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testharness.Wait(t, timeout, what, cond)
}

func TestCatchUpRecordsEveryBurnInRanges(t *testing.T) {
	t.Parallel()
	node := newFakeChain(25)
	want := expected(
		node.addBurn(0, 1, 0, 5),
		node.addBurn(9, 2, 0, 6),
		node.addBurn(9, 2, 1, 7), // a second burn in the same transaction
		node.addBurn(10, 3, 2, 1_000_000),
		node.addBurn(25, 4, 0, 8),
	)
	node.addBurn(26, 5, 0, 9) // beyond the target: must not be recorded
	h := newHarness(t, node)
	_, stop := h.start()
	h.waitCursor(25)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c := h.cursor(); c.Hash != node.hash(25).Hex() {
		t.Fatalf("cursor hash = %s, want %s", c.Hash, node.hash(25).Hex())
	}
	if got, want := node.requested(), [][2]uint64{{0, 9}, {10, 19}, {20, 25}}; !slices.Equal(got, want) {
		t.Fatalf("ranges requested = %v, want %v", got, want)
	}
	if n := testutil.ToFloat64(h.metrics.PaymentsInserted); n != 5 {
		t.Fatalf("inserted metric = %v, want 5", n)
	}
	if n := testutil.ToFloat64(h.metrics.PaymentsDuplicate); n != 0 {
		t.Fatalf("duplicate metric = %v, want 0", n)
	}
}

func TestStartBlockSeedsCursorOnce(t *testing.T) {
	t.Parallel()
	node := newFakeChain(30)
	node.addBurn(5, 1, 0, 5) // before START_BLOCK: not recorded
	want := expected(node.addBurn(20, 2, 0, 6))
	h := newHarness(t, node)
	h.lcfg.StartBlock = 20
	_, stop := h.start()
	h.waitCursor(30)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	if got := node.requested(); got[0] != [2]uint64{20, 29} {
		t.Fatalf("first range = %v, want [20 29]", got[0])
	}
}

func TestNodeErrorRollsBackAndRetries(t *testing.T) {
	t.Parallel()
	node := newFakeChain(15)
	want := expected(node.addBurn(3, 1, 0, 5), node.addBurn(12, 2, 0, 6))
	node.failing = 2
	h := newHarness(t, node)
	_, stop := h.start()
	h.waitCursor(15)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	if got, want := node.requested(), [][2]uint64{{0, 9}, {0, 9}, {0, 9}, {10, 15}}; !slices.Equal(got, want) {
		t.Fatalf("ranges requested = %v, want %v", got, want)
	}
	if n := testutil.ToFloat64(h.metrics.Polls.WithLabelValues(poller.ResultError)); n != 2 {
		t.Fatalf("error polls = %v, want 2", n)
	}
}

func TestReplicasNeverFetchACommittedRange(t *testing.T) {
	t.Parallel()
	node := newFakeChain(0)
	var all []chain.Burn
	for b := uint64(0); b < 200; b += 3 {
		all = append(all, node.addBurn(b, byte(b), 0, int64(b)+1))
	}
	h := newHarness(t, node)
	h.wcfg.MaxBlockRange = 7
	var loops []*poller.Loop
	for range 3 {
		l, _ := h.start()
		loops = append(loops, l)
	}
	// The target moves while the replicas run: each step once one of them
	// has reached the previous target.
	for target := int64(20); target <= 200; target += 20 {
		node.setTarget(target)
		h.waitCursor(target)
	}
	for _, l := range loops {
		if l.Health() != nil {
			t.Fatalf("a replica is unhealthy: %v", l.Health())
		}
	}
	h.waitCursor(200)
	if got, want := h.ledger(), expected(all...); !slices.Equal(got, want) {
		t.Fatalf("ledger has %d rows, want %d", len(got), len(want))
	}
	// Each range was fetched once, and they tile [0, 200] in order.
	next := uint64(0)
	for _, r := range node.requested() {
		if r[0] != next {
			t.Fatalf("range %v requested; expected one starting at %d (ranges %v)", r, next, node.requested())
		}
		next = r[1] + 1
	}
	if next != 201 {
		t.Fatalf("ranges end at %d, want 200", next-1)
	}
}

func TestFinalityViolationLatchesUntilCursorReset(t *testing.T) {
	t.Parallel()
	node := newFakeChain(9)
	node.addBurn(4, 1, 0, 5)
	h := newHarness(t, node)
	l, stop := h.start()
	h.waitCursor(9)
	committed := h.cursor()

	// Reorganise below the cursor: blocks from 6 are replaced and a burn
	// appears on the new branch.
	node.reorg(6)
	node.addBurn(15, 9, 0, 77)
	node.setTarget(19)
	v := l.Signals.Latched.Wait(t, 10*time.Second)
	if v.Block != 9 || v.Committed != committed.Hash || v.ChainHash != node.hash(9).Hex() || v.Payment != nil {
		t.Fatalf("violation = block %d committed %s chain %s payment %v; want block 9, %s, %s, none",
			v.Block, v.Committed, v.ChainHash, v.Payment, committed.Hash, node.hash(9).Hex())
	}
	if got := l.Violation(); got != "finality violation at block 9" {
		t.Fatalf("Violation() = %q", got)
	}
	if v := testutil.ToFloat64(h.metrics.FinalityViolation); v != 1 {
		t.Fatalf("burnpoller_finality_violation = %v, want 1", v)
	}
	// Latched, it looks for a reset and writes nothing.
	for range 3 {
		l.Signals.LatchChecked.Wait(t, 10*time.Second)
	}
	if c := h.cursor(); c.Block != 9 || c.Hash != committed.Hash {
		t.Fatalf("cursor moved to %d while latched", c.Block)
	}
	if got := h.ledger(); len(got) != 1 {
		t.Fatalf("ledger changed while latched: %v", got)
	}

	// The operator resets the cursor to before the fork.
	if _, err := h.writer().Reset(context.Background(), h.lcfg.CursorID, 5, poller.ResetOptions{MarkOrphaned: true}); err != nil {
		t.Fatal(err)
	}
	l.Signals.Cleared.Wait(t, 10*time.Second)
	h.waitCursor(19)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if l.Violation() != "" || testutil.ToFloat64(h.metrics.FinalityViolation) != 0 {
		t.Fatal("violation not cleared after the reset")
	}
	if got := h.ledger(); len(got) != 2 {
		t.Fatalf("ledger after reset = %v, want the original burn and the new branch's", got)
	}
}

func TestStopLetsTheInFlightTransactionCommit(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	want := expected(node.addBurn(2, 1, 0, 5))
	inside := make(chan struct{})
	release := make(chan struct{})
	node.hook = func(ctx context.Context, from, to uint64) {
		close(inside)
		<-release
	}
	h := newHarness(t, node)
	l, stop := h.start()
	<-inside
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The stop is pending while the transaction holds the lock.
	l.Signals.Stopping.Wait(t, 10*time.Second)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	if c := h.cursor(); c.Block != 5 {
		t.Fatalf("cursor = %d, want 5", c.Block)
	}
}

func TestStopRollsBackAtDrainTimeout(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	node.addBurn(2, 1, 0, 5)
	inside := make(chan struct{})
	node.hook = func(ctx context.Context, from, to uint64) {
		close(inside)
		<-ctx.Done() // a node that never answers
	}
	h := newHarness(t, node)
	// Only the drain timeout can end the transaction before the harness's
	// own 10 s guard: the node never answers and TX_TIMEOUT is longer.
	h.lcfg.DrainTimeout = 300 * time.Millisecond
	h.wcfg.TxTimeout = time.Minute
	_, stop := h.start()
	<-inside
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); len(got) != 0 {
		t.Fatalf("ledger = %v, want empty", got)
	}
	if c := h.cursor(); c.Block != -1 {
		t.Fatalf("cursor = %d, want -1", c.Block)
	}
}

func TestStopCancelsALockWaitAtOnce(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	h := newHarness(t, node)
	// Only cancelling the wait can end it before the harness's 10 s guard.
	h.wcfg.LockWait = time.Minute
	h.wcfg.TxTimeout = 2 * time.Minute
	if _, err := h.store.SeedCursor(context.Background(), h.lcfg.CursorID, -1, ""); err != nil {
		t.Fatal(err)
	}
	holder, err := h.store.Begin(context.Background(), payments.Limits{LockWait: time.Second, TxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.LockCursor(context.Background(), h.lcfg.CursorID); err != nil {
		t.Fatal(err)
	}
	_, stop := h.start()
	waitFor(t, 10*time.Second, "the loop waiting for the lock", func() bool {
		var n int
		err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'`).Scan(&n)
		return err == nil && n == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(node.requested()); n != 0 {
		t.Fatalf("%d ranges fetched without the lock", n)
	}
}

func TestProviderLimitedRangesAreCommittedAsReturned(t *testing.T) {
	t.Parallel()
	node := newFakeChain(20)
	want := expected(node.addBurn(3, 1, 0, 5), node.addBurn(17, 2, 0, 6))
	node.maxSpan = 4
	h := newHarness(t, node)
	_, stop := h.start()
	h.waitCursor(20)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	if got, want := node.requested(), [][2]uint64{{0, 3}, {4, 7}, {8, 11}, {12, 15}, {16, 19}, {20, 20}}; !slices.Equal(got, want) {
		t.Fatalf("ranges = %v, want %v", got, want)
	}
}

func TestUndecodableLogsAreRecordedAndTheCursorAdvances(t *testing.T) {
	t.Parallel()
	node := newFakeChain(9)
	want := expected(node.addBurn(2, 1, 0, 5))
	bad := types.Log{Address: burnContract, Topics: []common.Hash{chain.BurnTopic}, Data: []byte{1, 2, 3},
		BlockNumber: 4, BlockHash: node.hash(4), TxHash: common.HexToHash("0xbad"), Index: 7}
	node.rejects[4] = []chain.Rejected{{Log: bad, Reason: "invalid burn log: 1 topics, want 3"}}
	h := newHarness(t, node)
	_, stop := h.start()
	h.waitCursor(9)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
	var (
		txHash, reason string
		index          int
		block          int64
		rawData        string
	)
	err := h.pool.QueryRow(context.Background(),
		`SELECT tx_hash, log_index, block_number, reason, raw->>'data' FROM rejected_logs`).Scan(&txHash, &index, &block, &reason, &rawData)
	if err != nil {
		t.Fatal(err)
	}
	if txHash != bad.TxHash.Hex() || index != 7 || block != 4 || !strings.Contains(reason, "topics") || rawData != "0x010203" {
		t.Fatalf("rejected_logs row = %s/%d block %d %q data %s", txHash, index, block, reason, rawData)
	}
	if n := testutil.ToFloat64(h.metrics.RejectedLogs); n != 1 {
		t.Fatalf("rejected metric = %v, want 1", n)
	}
}

func TestRescanRecoversBurnsANodeLeftOut(t *testing.T) {
	t.Parallel()
	node := newFakeChain(30)
	all := expected(node.addBurn(5, 1, 0, 5), node.addBurn(25, 2, 0, 6), node.addBurn(28, 3, 1, 7))
	node.hidden[25], node.hidden[28] = true, true // a lying node: no logs for these blocks
	h := newHarness(t, node)
	h.lcfg.RescanDepth = 10
	h.lcfg.RescanInterval = time.Hour // the first rescan runs at once, the next not before an hour
	l, stop := h.start()
	h.waitCursor(30)
	if res := l.Signals.Rescanned.Wait(t, 10*time.Second); res.Recovered != 0 || res.RescanFrom != 21 || res.RescanTo != 30 {
		t.Fatalf("first rescan = %+v, want [21, 30] recovering nothing", res)
	}
	// Re-read blocks are duplicates by nature; they are not counted as such.
	if n := testutil.ToFloat64(h.metrics.PaymentsDuplicate); n != 0 {
		t.Fatalf("burnpoller_payments_duplicate_total = %v after a rescan, want 0", n)
	}
	if got := h.ledger(); len(got) != 1 {
		t.Fatalf("ledger before the node tells the truth = %v", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// The node now answers fully; a rescan of the last 10 blocks recovers
	// the two burns, and nothing else changes.
	node.mu.Lock()
	node.hidden = map[uint64]bool{}
	node.mu.Unlock()
	h.lcfg.RescanInterval = time.Millisecond
	l, stop = h.start()
	if res := l.Signals.Rescanned.Wait(t, 10*time.Second); res.Recovered != 2 {
		t.Fatalf("rescan after the node tells the truth = %+v, want 2 recovered", res)
	}
	if n := testutil.ToFloat64(h.metrics.RescanRecovered); n != 2 {
		t.Fatalf("burnpoller_rescan_recovered_total = %v, want 2", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, all) {
		t.Fatalf("ledger = %v, want %v", got, all)
	}
	if c := h.cursor(); c.Block != 30 {
		t.Fatalf("cursor = %d, want 30", c.Block)
	}
	// Catch-up asked [0 9] [10 19] [20 29] [30 30]; every rescan asks exactly
	// the 10 blocks below and at the cursor.
	for _, r := range node.requested()[4:] {
		if r != [2]uint64{21, 30} {
			t.Fatalf("rescan asked for %v, want [21 30]", r)
		}
	}
}

func TestRescanLatchesWhenTheCursorBlockChanged(t *testing.T) {
	t.Parallel()
	node := newFakeChain(12)
	h := newHarness(t, node)
	h.lcfg.RescanDepth = 5
	h.lcfg.RescanInterval = time.Millisecond
	l, stop := h.start()
	h.waitCursor(12)
	node.reorg(0) // every block hash changes; the target does not move
	if v := l.Signals.Latched.Wait(t, 10*time.Second); v.Block != 12 || v.SeenAt != 12 || v.ChainHash != node.hash(12).Hex() {
		t.Fatalf("rescan latched %+v, want the cursor block 12 with its new hash", v)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := h.cursor(); c.Block != 12 {
		t.Fatalf("cursor = %d, want 12", c.Block)
	}
}

func TestThrottledWaitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	throttled := &chain.Error{Class: chain.ClassThrottled, Endpoint: "fake", Method: "eth_getLogs",
		RetryAfter: 700 * time.Millisecond, Err: errors.New("429 Too Many Requests")}
	tests := []struct {
		name     string
		give     error
		maxWait  time.Duration
		min, max time.Duration
	}{
		{"retry-after beats the back-off", throttled, 50 * time.Millisecond, 700 * time.Millisecond, 700 * time.Millisecond},
		{"retry-after beyond the cap is still honoured", throttled, 100 * time.Millisecond, 700 * time.Millisecond, 700 * time.Millisecond},
		{"permanent waits the longest", &chain.Error{Class: chain.ClassPermanent, Err: errors.New("401")}, time.Second, time.Second, time.Second},
		{"transient backs off", errors.New("reset"), time.Second, 125 * time.Millisecond, 375 * time.Millisecond},
		{"a hook the group disowned waits the longest", fmt.Errorf("x: %w", payments.ErrHookMismatch), time.Second, time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := poller.RetryWait(tt.give, tt.maxWait)
			if got < tt.min || got > tt.max {
				t.Fatalf("wait = %s, want within [%s, %s]", got, tt.min, tt.max)
			}
		})
	}

	// And the loop uses it: a 429 fails the transaction, which is retried
	// and then commits.
	node := newFakeChain(5)
	want := expected(node.addBurn(1, 1, 0, 5))
	node.failing = 1
	node.failErr = throttled
	h := newHarness(t, node)
	l, stop := h.start()
	if err := l.Signals.Failed.Wait(t, 10*time.Second); !errors.Is(err, throttled) {
		t.Fatalf("failure = %v, want the 429", err)
	}
	h.waitCursor(5)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger = %v, want %v", got, want)
	}
}

// TestReplicasShareOneReadOfTheChain: while caught up, replicas of a group
// take the cursor in turn; one that takes it within POLL_INTERVAL of
// another's read lets that read stand, so the node sees one read per
// interval, and a new head that wakes every replica costs one read, not one
// per replica.
func TestReplicasShareOneReadOfTheChain(t *testing.T) {
	t.Parallel()
	node := newFakeChain(5)
	h := newHarness(t, node)
	h.lcfg.PollInterval = time.Hour // only the test's wakes end a wait
	wakeA, wakeB := make(chan struct{}), make(chan struct{})
	h.lcfg.Wake = wakeA
	a := h.loop()
	h.run(a)
	a.Signals.Committed.Wait(t, 10*time.Second) // blocks 0-5, and at the target
	if got := node.targetCalls(); got != 1 {
		t.Fatalf("%d reads of the target, want 1", got)
	}
	// B's first turn comes within the interval of A's read: it lets it stand.
	h.lcfg.Wake = wakeB
	b := h.loop()
	h.run(b)
	b.Signals.Skipped.Wait(t, 10*time.Second)
	if got := node.targetCalls(); got != 1 {
		t.Fatalf("%d reads of the target after B's turn, want 1", got)
	}
	// A new head wakes both while the test holds the cursor: whichever
	// takes it first reads the chain, after both woke; the other skips.
	ctx := context.Background()
	hold, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT 1 FROM block_cursors WHERE id = $1 FOR UPDATE`, h.lcfg.CursorID); err != nil {
		t.Fatal(err)
	}
	node.setTarget(6)
	wakeA <- struct{}{}
	wakeB <- struct{}{}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var other *poller.Loop
	select {
	case <-a.Signals.Committed.C():
		other = b
	case <-b.Signals.Committed.C():
		other = a
	case <-time.After(10 * time.Second):
		t.Fatal("no replica read the new head")
	}
	other.Signals.Skipped.Wait(t, 10*time.Second)
	if got := node.targetCalls(); got != 2 {
		t.Fatalf("%d reads of the target after the new head, want 2 (one per replica would be 3)", got)
	}
	h.waitCursor(6)
}

// TestAReplicaHandsBackACursorAnotherJustMoved: a replica that takes the
// cursor row right after another replica moved it (within 200 ms: the
// other is catching up, its next ranges in flight) hands the row back
// without reading the chain; once the row is older than that (the other
// stopped), it takes over and records the rest exactly once.
func TestAReplicaHandsBackACursorAnotherJustMoved(t *testing.T) {
	t.Parallel()
	node := newFakeChain(9)
	first := node.addBurn(4, 1, 0, 5)
	rest := []chain.Burn{node.addBurn(12, 2, 0, 6), node.addBurn(25, 3, 0, 7)}
	h := newHarness(t, node)
	_, stop := h.start()
	h.waitCursor(9)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Another replica moved the cursor "just now", and keeps doing so:
	// its move stays within the window for as long as the test needs.
	if _, err := h.pool.Exec(ctx, `UPDATE block_cursors SET updated_at = now() + interval '1 hour' WHERE id = $1`, h.lcfg.CursorID); err != nil {
		t.Fatal(err)
	}
	node.setTarget(30)
	asked, targets := len(node.requested()), node.targetCalls()
	l := h.loop()
	h.run(l)
	l.Signals.Standby.Wait(t, 10*time.Second)
	l.Signals.Standby.Wait(t, 10*time.Second) // and again at its next turn
	if got := len(node.requested()); got != asked || node.targetCalls() != targets {
		t.Fatalf("the replica read the chain while another was catching up: %d ranges (had %d), %d targets (had %d)",
			got, asked, node.targetCalls(), targets)
	}
	if c := h.cursor(); c.Block != 9 {
		t.Fatalf("cursor = %d while handing back, want 9", c.Block)
	}
	// The other replica stopped moving the cursor: taken over.
	if _, err := h.pool.Exec(ctx, `UPDATE block_cursors SET updated_at = now() - interval '1 second' WHERE id = $1`, h.lcfg.CursorID); err != nil {
		t.Fatal(err)
	}
	h.waitCursor(30)
	if got, want := h.ledger(), expected(append([]chain.Burn{first}, rest...)...); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := node.requested()[asked]; got[0] != 10 {
		t.Fatalf("first range after the takeover = %v, want one from block 10", got)
	}
}

// TestAFreshCursorIsNotHandedBackToItsOwnSeed: a cursor nobody has moved
// since it was seeded, a moment ago, is no other replica's catch-up: the
// replica that seeded it records its first range at once, without handing
// the row back (which cost every first start 200 ms).
func TestAFreshCursorIsNotHandedBackToItsOwnSeed(t *testing.T) {
	t.Parallel()
	node := newFakeChain(9)
	b := node.addBurn(4, 1, 0, 5)
	h := newHarness(t, node)
	l, stop := h.start()
	defer func() { _ = stop() }()
	l.Signals.Committed.Wait(t, 10*time.Second)
	select {
	case <-l.Signals.Standby.C():
		t.Fatal("the replica handed back the cursor it had just seeded")
	default:
	}
	h.waitCursor(9)
	if got, want := h.ledger(), expected(b); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAPaymentRecordedBehindTheCheckIsRecordedOnceAfterTheRetry: the copy
// of the payments a ledger check found new meets one recorded after all
// (here a trigger records the last range's burn itself, inside every copy
// of it, as a writer the check did not see would): the transaction fails
// with nothing written, and is retried checking every row of every range,
// not only its first, until one commits; each burn is recorded once, with
// one confirmed event.
func TestAPaymentRecordedBehindTheCheckIsRecordedOnceAfterTheRetry(t *testing.T) {
	t.Parallel()
	node := newFakeChain(25)
	want := expected(
		node.addBurn(0, 1, 0, 5),
		node.addBurn(10, 3, 2, 1_000_000),
		node.addBurn(25, 4, 0, 8), // the third range's: its copy fails
	)
	h := newHarness(t, node)
	ctx := context.Background()
	if _, err := h.pool.Exec(ctx, `
		CREATE SEQUENCE trap_fired;
		CREATE FUNCTION trap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF pg_trigger_depth() = 1 AND NEW.block_number = 25 AND current_query() ILIKE 'copy%' THEN
				PERFORM nextval('trap_fired');
				INSERT INTO payments (chain_id, contract, tx_hash, log_index, block_number, block_hash, payer, digest, amount, burned_at)
				VALUES (NEW.chain_id, NEW.contract, NEW.tx_hash, NEW.log_index, NEW.block_number, NEW.block_hash, NEW.payer,
				        NEW.digest, NEW.amount, NEW.burned_at);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER trap BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION trap();`); err != nil {
		t.Fatal(err)
	}
	l, stop := h.start()
	h.waitCursor(25)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// One failed transaction, the first: its retry checked every range.
	var failed []error
	for len(l.Signals.Failed.C()) > 0 {
		failed = append(failed, <-l.Signals.Failed.C())
	}
	if len(failed) != 1 || !errors.Is(failed[0], payments.ErrRecorded) {
		t.Fatalf("failed transactions: %v; want one, with ErrRecorded", failed)
	}
	if got := h.ledger(); !slices.Equal(got, want) {
		t.Fatalf("ledger:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var fired, events, confirmed, distinct int64
	if err := h.pool.QueryRow(ctx, `SELECT (SELECT last_value FROM trap_fired WHERE is_called),
		(SELECT count(*) FROM payment_events), (SELECT count(*) FROM payment_events WHERE kind = 'confirmed'),
		(SELECT count(DISTINCT payment_id) FROM payment_events e JOIN payments p ON p.id = e.payment_id)`).
		Scan(&fired, &events, &confirmed, &distinct); err != nil {
		t.Fatal(err)
	}
	if fired < 1 || events != 3 || confirmed != 3 || distinct != 3 {
		t.Fatalf("trap fired %d times; %d events, %d confirmed, of %d payments; want at least once, and 3 of each",
			fired, events, confirmed, distinct)
	}
	if got, want := node.requested(), [][2]uint64{{0, 9}, {10, 19}, {20, 25}}; len(got) < 3 || !slices.Equal(got[:3], want) {
		t.Fatalf("ranges requested = %v, want %v first: the three in one transaction", got, want)
	}
}
