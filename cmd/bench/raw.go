package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/burnpoller/burnpoller/chain"
)

// rawClient is the plain HTTP client of the raw ceilings, for up to
// parallel requests at once. It asks for uncompressed replies, as
// burnpoller does of a node on its host: compressing costs the node CPU
// that neither side gets anything for on loopback.
func rawClient(parallel int) *http.Client {
	return &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: parallel, DisableCompression: true}}
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
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

// SparseFloor is the sparse chain read in ranges of the provider's cap, one
// after another, through a plain net/http client with no burnpoller code:
// straight from the node (what the node itself takes) and through the
// provider-like proxy (the floor: ceil(blocks / cap) round trips, measured
// rather than computed, so the node's own time is in it).
type SparseFloor struct {
	Node          string  `json:"node"`
	Blocks        uint64  `json:"blocks"`
	Calls         int     `json:"calls"`
	Logs          int     `json:"logs"`
	NodeSeconds   float64 `json:"node_alone_seconds"`
	ProxySeconds  float64 `json:"through_proxy_seconds"`
	ComputedFloor float64 `json:"computed_floor_seconds"`
	// SeedSeconds is the time to start the node and seed the chain.
	SeedSeconds float64 `json:"seed_seconds"`
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
