package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"golang.org/x/sync/errgroup"
)

// ReceiptsProbe is the node serving the receipts of every block holding a
// burn in one way: Batch blocks per request, Parallel requests at a time.
type ReceiptsProbe struct {
	Batch    int  `json:"blocks_per_request"`
	Parallel int  `json:"requests_in_flight"`
	Rate     Rate `json:"rate"`
}

// receiptsProbeShapes are the ways the receipts ceiling is read: the best
// of them is the ceiling, and all of them show what batch size and how
// many requests at once the node serves best.
var receiptsProbeShapes = []struct{ batch, parallel int }{
	{1, 1}, {4, 1}, {16, 1}, {1, 2}, {4, 2}, {1, 4}, {4, 4}, {16, 4},
}

// rawReceiptsCeiling reads the receipts of blocks (each holding a burn)
// through a plain net/http client, eth_getBlockReceipts by number, in each
// of receiptsProbeShapes; the replies are read and checked for errors but
// not decoded. No burnpoller code runs. The best shape is the ceiling.
func rawReceiptsCeiling(ctx context.Context, url string, blocks []uint64, burns int) (Rate, []ReceiptsProbe, error) {
	var (
		best   Rate
		probes []ReceiptsProbe
	)
	for _, s := range receiptsProbeShapes {
		r, err := rawReceipts(ctx, url, blocks, burns, s.batch, s.parallel)
		if err != nil {
			return Rate{}, nil, fmt.Errorf("receipts, %d blocks a request, %d at a time: %w", s.batch, s.parallel, err)
		}
		probes = append(probes, ReceiptsProbe{Batch: s.batch, Parallel: s.parallel, Rate: r})
		if r.PerSec > best.PerSec {
			best = r
		}
	}
	return best, probes, nil
}

// rawReceipts reads the receipts of blocks, batch blocks per request and
// parallel requests at a time.
func rawReceipts(ctx context.Context, url string, blocks []uint64, burns, batch, parallel int) (Rate, error) {
	client := rawClient(parallel)
	defer client.CloseIdleConnections()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	calls := 0
	start := time.Now()
	for chunk := range slices.Chunk(blocks, batch) {
		calls++
		g.Go(func() error { return rawBlockReceipts(gctx, client, url, chunk) })
	}
	if err := g.Wait(); err != nil {
		return Rate{}, err
	}
	took := time.Since(start)
	return Rate{Items: burns, Seconds: took.Seconds(), PerSec: float64(burns) / took.Seconds(), Calls: calls}, nil
}

// rawBlockReceipts asks for the receipts of blocks in one request (a
// JSON-RPC batch when there are several) and fails on any error reply or a
// block without receipts.
func rawBlockReceipts(ctx context.Context, client *http.Client, url string, blocks []uint64) error {
	type call struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Method  string `json:"method"`
		Params  []any  `json:"params"`
	}
	calls := make([]call, len(blocks))
	for i, n := range blocks {
		calls[i] = call{"2.0", i, "eth_getBlockReceipts", []any{hexutil.Uint64(n)}}
	}
	var body []byte
	if len(calls) == 1 {
		body, _ = json.Marshal(calls[0])
	} else {
		body, _ = json.Marshal(calls)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	type reply struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	var replies []reply
	if len(calls) == 1 {
		var r reply
		err = json.Unmarshal(raw, &r)
		replies = []reply{r}
	} else {
		err = json.Unmarshal(raw, &replies)
	}
	if err != nil {
		return fmt.Errorf("eth_getBlockReceipts of blocks %d to %d: %w", blocks[0], blocks[len(blocks)-1], err)
	}
	if len(replies) != len(blocks) {
		return fmt.Errorf("%d replies to %d calls", len(replies), len(blocks))
	}
	for _, r := range replies {
		if r.Error != nil {
			return fmt.Errorf("eth_getBlockReceipts: %s", r.Error.Message)
		}
		if len(r.Result) < 3 || string(r.Result) == "null" {
			return fmt.Errorf("eth_getBlockReceipts of a block holding burns: %s", r.Result)
		}
	}
	return nil
}
