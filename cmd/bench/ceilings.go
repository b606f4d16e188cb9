package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/devchain"
)

// endpointsCounter counts the eth_getLogs calls chain.Endpoints makes.
type endpointsCounter struct{ calls int }

func (c *endpointsCounter) RPC(_, method, _ string, _ time.Duration) {
	if method == "eth_getLogs" {
		c.calls++
	}
}
func (*endpointsCounter) BadReply(string, string)   {}
func (*endpointsCounter) Lagging(string, int64)     {}
func (*endpointsCounter) RangeLimit(string, uint64) {}
func (*endpointsCounter) Active(string)             {}

// ceilingEndpoints reads the node at info as the poller does: its endpoint
// logic, the default MAX_BLOCK_RANGE, the finalized target; counter, when
// not nil, hears every call.
func ceilingEndpoints(ctx context.Context, info devchain.Info, counter *endpointsCounter) (*chain.Endpoints, error) {
	opts := chain.Options{Timeout: time.Minute}
	var obs chain.EndpointsObserver
	if counter != nil {
		opts.Observer, obs = counter, counter
	}
	cl, err := chain.Dial(ctx, info.RPCURL, opts)
	if err != nil {
		return nil, err
	}
	eps := chain.NewEndpoints([]*chain.Client{cl}, chain.EndpointsConfig{
		ChainID: info.ChainID, Finality: chain.FinalityFinalized, MaxRange: 2000,
	}, obs, slog.New(slog.DiscardHandler))
	if _, err := eps.Target(ctx); err != nil {
		eps.Close()
		return nil, err
	}
	return eps, nil
}

// nodeCeiling reads every burn up to target as the poller does (same
// endpoint logic, default MAX_BLOCK_RANGE), decodes it and stores nothing
// but the rows for the Postgres ceiling, which are not timed.
func nodeCeiling(ctx context.Context, info devchain.Info, target uint64) ([][]any, []common.Hash, Rate, error) {
	counter := &endpointsCounter{}
	eps, err := ceilingEndpoints(ctx, info, counter)
	if err != nil {
		return nil, nil, Rate{}, err
	}
	defer eps.Close()
	var (
		rows    [][]any
		blocks  []common.Hash
		elapsed time.Duration
	)
	for from := uint64(0); from <= target; {
		start := time.Now()
		r, err := eps.BurnRange(ctx, []common.Address{info.BurnContract}, from, target)
		elapsed += time.Since(start)
		if err != nil {
			return nil, nil, Rate{}, err
		}
		rows = appendRows(rows, info.ChainID, r.Burns)
		for _, b := range r.Burns {
			if len(blocks) == 0 || blocks[len(blocks)-1] != b.BlockHash {
				blocks = append(blocks, b.BlockHash)
			}
		}
		from = r.To.Number + 1
	}
	return rows, blocks, Rate{Items: len(rows), Seconds: elapsed.Seconds(), PerSec: float64(len(rows)) / elapsed.Seconds(), Calls: counter.calls}, nil
}

// receiptsCeiling is the node alone serving the receipts of every block
// holding a burn: raw eth_getBlockReceipts by hash, four per batch, through
// go-ethereum's client, the replies read but not decoded. It is what the
// receipts check (VERIFY_RECEIPTS) costs the node, without our code, in the
// sim run; the real-node runs read it over plain HTTP in several shapes
// (rawReceiptsCeiling).
func receiptsCeiling(ctx context.Context, url string, blocks []common.Hash, burns int) (Rate, error) {
	c, err := rpc.DialContext(ctx, url)
	if err != nil {
		return Rate{}, err
	}
	defer c.Close()
	start := time.Now()
	calls := 0
	for chunk := range slices.Chunk(blocks, 4) {
		raws := make([]json.RawMessage, len(chunk))
		elems := make([]rpc.BatchElem, len(chunk))
		for i, h := range chunk {
			elems[i] = rpc.BatchElem{Method: "eth_getBlockReceipts", Args: []any{h}, Result: &raws[i]}
		}
		if err := c.BatchCallContext(ctx, elems); err != nil {
			return Rate{}, err
		}
		for _, el := range elems {
			if el.Error != nil {
				return Rate{}, el.Error
			}
		}
		calls++
	}
	took := time.Since(start)
	return Rate{Items: burns, Seconds: took.Seconds(), PerSec: float64(burns) / took.Seconds(), Calls: calls}, nil
}

// pgCeiling COPYs the rows into a fresh payments table with its indexes
// and constraints.
func pgCeiling(ctx context.Context, admin string, rows [][]any) (Rate, error) {
	conn, done, err := migratedDB(ctx, admin, "bench_copy")
	if err != nil {
		return Rate{}, err
	}
	defer done()
	return copyRate(ctx, conn, "payments", payCols, rows)
}

// sharedCeiling fetches every burn as nodeCeiling does and COPYs each range
// into a fresh payments table while the next is fetched: the most node and
// Postgres can do together on this machine, with no burnpoller in between.
func sharedCeiling(ctx context.Context, admin string, info devchain.Info, target uint64) (Rate, error) {
	conn, done, err := migratedDB(ctx, admin, "bench_shared")
	if err != nil {
		return Rate{}, err
	}
	defer done()
	eps, err := ceilingEndpoints(ctx, info, nil)
	if err != nil {
		return Rate{}, err
	}
	defer eps.Close()
	type chunk struct {
		rows [][]any
		err  error
	}
	chunks := make(chan chunk, 1)
	start := time.Now()
	go func() {
		defer close(chunks)
		for from := uint64(0); from <= target; {
			r, err := eps.BurnRange(ctx, []common.Address{info.BurnContract}, from, target)
			if err != nil {
				chunks <- chunk{err: err}
				return
			}
			chunks <- chunk{rows: appendRows(nil, info.ChainID, r.Burns)}
			from = r.To.Number + 1
		}
	}()
	total := 0
	for c := range chunks {
		if c.err != nil {
			return Rate{}, c.err
		}
		n, err := conn.CopyFrom(ctx, pgx.Identifier{"payments"}, payCols, pgx.CopyFromRows(c.rows))
		if err != nil {
			return Rate{}, err
		}
		total += int(n)
	}
	took := time.Since(start)
	return Rate{Items: total, Seconds: took.Seconds(), PerSec: float64(total) / took.Seconds()}, nil
}

// payCols are the payments columns COPY fills.
var payCols = []string{"chain_id", "contract", "tx_hash", "log_index", "block_number", "block_hash", "payer", "digest", "amount", "burned_at"}

// appendRows appends burns as payments rows, in the order of payCols.
func appendRows(rows [][]any, chainID uint64, burns []chain.Burn) [][]any {
	for _, b := range burns {
		rows = append(rows, []any{int64(chainID), strings.ToLower(b.Contract.Hex()), b.TxHash.Hex(), int32(b.LogIndex),
			int64(b.BlockNumber), b.BlockHash.Hex(), strings.ToLower(b.Payer.Hex()), b.Digest.Hex(), b.Amount.String(),
			time.Unix(b.Timestamp, 0).UTC()})
	}
	return rows
}

// copyCeilings COPYs rows into the payments table of a fresh, migrated
// database, then one confirmed event per row into payment_events, and
// times each: what Postgres does for the rows the default settings write,
// with no burnpoller code.
func copyCeilings(ctx context.Context, admin string, rows [][]any) (payments, events Rate, err error) {
	conn, done, err := migratedDB(ctx, admin, "bench_copy")
	if err != nil {
		return Rate{}, Rate{}, err
	}
	defer done()
	if payments, err = copyRate(ctx, conn, "payments", payCols, rows); err != nil {
		return Rate{}, Rate{}, err
	}
	if events, err = copyRate(ctx, conn, "payment_events", eventCols, eventRows(rows)); err != nil {
		return Rate{}, Rate{}, err
	}
	return payments, events, nil
}

// copyRate COPYs rows into table's cols on conn and times it. (COPY wants
// numeric amounts as values pgx can encode; decimal text casts.)
func copyRate(ctx context.Context, conn *pgx.Conn, table string, cols []string, rows [][]any) (Rate, error) {
	start := time.Now()
	n, err := conn.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
	if err != nil {
		return Rate{}, err
	}
	took := time.Since(start)
	return Rate{Items: int(n), Seconds: took.Seconds(), PerSec: float64(n) / took.Seconds()}, nil
}

// eventCols are the payment_events columns COPY fills.
var eventCols = []string{"seq", "event_id", "kind", "chain_id", "contract", "tx_hash", "log_index", "block_number", "block_hash",
	"payer", "digest", "amount", "burned_at", "payment_id"}

// eventRows are the confirmed events of payments rows (in payCols order),
// numbered from 1, in the order of eventCols.
func eventRows(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		seq := int64(i + 1)
		id := fmt.Sprintf("%d:%s:%d:confirmed:%s", r[0], r[2], r[3], r[5])
		out[i] = []any{seq, id, "confirmed", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], seq}
	}
	return out
}
