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

// rawNodeCeiling is the node alone: eth_getLogs for contract's burn topic
// over [0, target] in as few calls as the node accepts (the whole range
// first; a refused or failed range is halved), through a plain net/http
// client, the replies read and their logs counted but not decoded. None of
// burnpoller's code runs: it is what the node does without us.
func rawNodeCeiling(ctx context.Context, url string, contract common.Address, target uint64) (Rate, error) {
	client := &http.Client{Timeout: 5 * time.Minute}
	var (
		logs, calls int
		took        time.Duration
	)
	type span struct{ from, to uint64 }
	todo := []span{{0, target}}
	for len(todo) > 0 {
		s := todo[0]
		todo = todo[1:]
		body, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs",
			"params": []any{map[string]any{
				"fromBlock": hexutil.Uint64(s.from), "toBlock": hexutil.Uint64(s.to),
				"address": contract, "topics": [][]common.Hash{{chain.BurnTopic}},
			}},
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return Rate{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		took += time.Since(start)
		calls++
		if err != nil {
			return Rate{}, err
		}
		var reply struct {
			Result []json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &reply); err != nil {
			return Rate{}, fmt.Errorf("eth_getLogs [%d, %d]: %w", s.from, s.to, err)
		}
		if reply.Error != nil {
			if s.from == s.to {
				return Rate{}, fmt.Errorf("eth_getLogs of block %d refused: %s", s.from, reply.Error.Message)
			}
			mid := s.from + (s.to-s.from)/2
			todo = append([]span{{s.from, mid}, {mid + 1, s.to}}, todo...)
			continue
		}
		logs += len(reply.Result)
	}
	return Rate{Items: logs, Seconds: took.Seconds(), PerSec: float64(logs) / took.Seconds(), Calls: calls}, nil
}
