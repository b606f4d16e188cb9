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

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"golang.org/x/sync/errgroup"

	"github.com/burnpoller/burnpoller/chain"
)

// The ceilings read without burnpoller code: the node's raw eth_getLogs and
// eth_getBlockReceipts through a plain net/http client, the replies read
// and counted but not decoded.

// rawClient is the plain HTTP client of the raw ceilings, for up to
// parallel requests at once. It asks for uncompressed replies, as
// burnpoller does of a node on its host: compressing costs the node CPU
// that neither side gets anything for on loopback.
func rawClient(parallel int) *http.Client {
	return &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: parallel, DisableCompression: true}}
}

// rawPost posts the JSON-RPC request body to url through client and
// returns the reply's body, unread beyond its bytes.
func rawPost(ctx context.Context, client *http.Client, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// rawNodeCeiling is the node alone: eth_getLogs for contract's burn topic
// over [0, target] in as few calls as the node accepts (the whole range
// first; a refused or failed range is halved), through a plain net/http
// client, the replies read and their logs counted but not decoded. None of
// burnpoller's code runs: it is what the node does without us.
func rawNodeCeiling(ctx context.Context, url string, contract common.Address, target uint64) (Rate, error) {
	client := rawClient(1)
	var (
		logs, calls int
		took        time.Duration
	)
	type span struct{ from, to uint64 }
	todo := []span{{0, target}}
	for len(todo) > 0 {
		s := todo[0]
		todo = todo[1:]
		start := time.Now()
		n, refused, err := rawGetLogs(ctx, client, url, contract, s.from, s.to)
		took += time.Since(start)
		calls++
		if err != nil {
			return Rate{}, err
		}
		if refused != "" {
			if s.from == s.to {
				return Rate{}, fmt.Errorf("eth_getLogs of block %d refused: %s", s.from, refused)
			}
			mid := s.from + (s.to-s.from)/2
			todo = append([]span{{s.from, mid}, {mid + 1, s.to}}, todo...)
			continue
		}
		logs += n
	}
	return Rate{Items: logs, Seconds: took.Seconds(), PerSec: float64(logs) / took.Seconds(), Calls: calls}, nil
}

// rawGetLogs asks url for the burn logs of contract in [from, to] through
// client and counts them, undecoded; refused is the node's error message,
// if it answered with one.
func rawGetLogs(ctx context.Context, client *http.Client, url string, contract common.Address, from, to uint64) (n int, refused string, err error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs",
		"params": []any{map[string]any{
			"fromBlock": hexutil.Uint64(from), "toBlock": hexutil.Uint64(to),
			"address": contract, "topics": [][]common.Hash{{chain.BurnTopic}},
		}},
	})
	raw, err := rawPost(ctx, client, url, body)
	if err != nil {
		return 0, "", err
	}
	var reply struct {
		Result []json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return 0, "", fmt.Errorf("eth_getLogs [%d, %d]: %w", from, to, err)
	}
	if reply.Error != nil {
		return 0, reply.Error.Message, nil
	}
	return len(reply.Result), "", nil
}

// rawCapped reads [0, last] in ranges of span blocks, one after another,
// and returns the seconds it took, the calls and the logs.
func rawCapped(ctx context.Context, url string, contract common.Address, last, span uint64) (float64, int, int, error) {
	client := rawClient(1)
	var calls, logs int
	start := time.Now()
	for from := uint64(0); from <= last; from += span {
		n, refused, err := rawGetLogs(ctx, client, url, contract, from, min(last, from+span-1))
		if err != nil {
			return 0, 0, 0, err
		}
		if refused != "" {
			return 0, 0, 0, fmt.Errorf("eth_getLogs [%d, %d] refused: %s", from, min(last, from+span-1), refused)
		}
		calls++
		logs += n
	}
	return time.Since(start).Seconds(), calls, logs, nil
}

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
	raw, err := rawPost(ctx, client, url, body)
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
