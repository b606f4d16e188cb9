package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ethereum/go-ethereum/rpc"
)

// httpBatch sends elems as one JSON-RPC batch over HTTP and decodes each
// reply as it streams in, straight into its element's Result, filling each
// element's Error as go-ethereum's BatchCallContext does. go-ethereum's
// client reads a batch reply into raw messages first and then decodes each
// one again: four passes of encoding/json over every byte, where this
// reads each byte once (replyReader). Replies of logs and receipts were the poller's largest
// cost (BENCHMARKS.md), so this is the path of every batch, over HTTP and
// over WebSocket (wsConn).
func (c *Client) httpBatch(ctx context.Context, hc *http.Client, elems []rpc.BatchElem) error {
	body, err := batchBody(elems)
	if err != nil {
		return err
	}
	return c.post(ctx, hc, body, func(r io.Reader) error { return decodeBatch(r, elems) })
}

// httpCall sends one JSON-RPC call over HTTP and decodes its reply into
// result as httpBatch does an element's. The reply answers the call
// whatever its id, as with go-ethereum's client, whose decoding of a
// reply this replaces over HTTP: it builds an error's data whole.
func (c *Client) httpCall(ctx context.Context, hc *http.Client, result any, method string, args []any) error {
	body, err := json.Marshal(call{JSONRPC: "2.0", ID: 1, Method: method, Params: args})
	if err != nil {
		return err
	}
	el := rpc.BatchElem{Method: method, Args: args, Result: result}
	if err := c.post(ctx, hc, body, func(r io.Reader) error { return decodeCall(r, &el) }); err != nil {
		return err
	}
	return el.Error
}

// post sends body to the node and hands a 2xx reply to decode. Any other
// reply is an rpc.HTTPError with the status and up to maxErrorBody bytes of
// the body, which may carry a JSON-RPC error, for classify.
func (c *Client) post(ctx context.Context, hc *http.Client, body []byte, decode func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.rawURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return rpc.HTTPError{Status: resp.Status, StatusCode: resp.StatusCode, Body: b}
	}
	return decode(resp.Body)
}

// call is one JSON-RPC request.
type call struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params,omitempty"`
}

// batchBody is the request of elems, element i with id i.
func batchBody(elems []rpc.BatchElem) ([]byte, error) {
	calls := make([]call, len(elems))
	for i, el := range elems {
		calls[i] = call{JSONRPC: "2.0", ID: i, Method: el.Method, Params: el.Args}
	}
	return json.Marshal(calls)
}

// decodeBatch reads a batch reply from r into elems, sent with ids 0, 1,
// and so on (readBatch). An element with no reply gets
// rpc.ErrMissingBatchResponse, one with neither result nor error
// rpc.ErrNoResult, one whose result does not decode that error. A reply
// that is not an array (one error object for the whole batch) or is not
// JSON fails the whole batch.
func decodeBatch(r io.Reader, elems []rpc.BatchElem) error {
	d := newStreamReader(r)
	defer d.release()
	return d.readBatch(elems, 0)
}

// readBatch reads a batch reply into elems, sent with ids base, base+1,
// and so on (decodeBatch).
func (d *replyReader) readBatch(elems []rpc.BatchElem, base int64) error {
	c, ok := d.peek()
	switch {
	case ok && c == '[':
	case ok && c == '{':
		// One reply for the whole batch. Its error is told, but, as with
		// go-ethereum's client, the batch fails as a transient failure
		// whatever the code says.
		rep, err := d.readReply(nil, 0, nil)
		if err != nil {
			return fmt.Errorf("reading the batch reply: %w", err)
		}
		if rep.err != nil {
			return fmt.Errorf("the node answered the batch with one reply: %s (code %d)", rep.err.Error(), rep.err.Code)
		}
		return errors.New("the node answered the batch with one reply")
	default:
		return fmt.Errorf("reading the batch reply: %w", d.syntax("the reply"))
	}
	if err := d.open('['); err != nil {
		return fmt.Errorf("reading the batch reply: %w", err)
	}
	answered := make([]bool, len(elems))
	for more := !d.empty(']'); more; {
		rep, err := d.readReply(elems, base, answered)
		if err != nil {
			return fmt.Errorf("reading the batch reply: %w", err)
		}
		if rep.index >= 0 { // else not ours, or a repeat
			answered[rep.index] = true
			elems[rep.index].Error = rep.elementError()
		}
		if more, err = d.more(']'); err != nil {
			return fmt.Errorf("reading the batch reply: %w", err)
		}
	}
	for i := range elems {
		if !answered[i] {
			elems[i].Error = rpc.ErrMissingBatchResponse
		}
	}
	return nil
}

// decodeCall reads the reply to a lone call from r into el, as
// decodeBatch does an element's; a reply that is not one JSON object
// fails the call.
func decodeCall(r io.Reader, el *rpc.BatchElem) error {
	d := newStreamReader(r)
	defer d.release()
	return d.readCall(el)
}

// readCall reads the reply to a lone call into el (decodeCall).
func (d *replyReader) readCall(el *rpc.BatchElem) error {
	rep, err := d.readReply([]rpc.BatchElem{*el}, 0, nil)
	if err != nil {
		return fmt.Errorf("reading the reply: %w", err)
	}
	el.Error = rep.elementError()
	return nil
}

// reply is one reply of a batch as readReply found it.
type reply struct {
	index     int // the element it answers, or -1
	result    bool
	decodeErr error // the result's, decoded into the element's Result
	err       *replyError
}

// elementError is the error of the element rep answers: its JSON-RPC
// error, rpc.ErrNoResult without a result, or its result's decoding's.
func (rep reply) elementError() error {
	switch {
	case rep.err != nil:
		return rep.err
	case !rep.result:
		return rpc.ErrNoResult
	default:
		return rep.decodeErr
	}
}

// maxID is the longest id read: the client's are short integers.
const maxID = 32

// readReply reads one reply object from d. Its result is decoded into
// the Result of the element its id names (id base names elems[0]),
// unless that element is answered already: as it streams in when the id
// came first (as nodes write it), else once the object is read. With
// answered nil, its id is not looked at: it answers the one element of
// elems, if there is one (a lone call). The result and error of a reply
// that answers none are skipped unheld. A result that does not fit its
// element's type is that element's error; JSON that is not well formed,
// or a failed read (the reply over the cap, a broken connection), fails
// the whole reply.
func (d *replyReader) readReply(elems []rpc.BatchElem, base int64, answered []bool) (reply, error) {
	rep := reply{index: -1}
	if answered == nil && len(elems) == 1 {
		rep.index = 0
	}
	idRead := answered == nil
	if c, ok := d.peek(); !ok || c != '{' {
		return rep, d.syntax("the reply")
	}
	// A result or error before the id, or given again, is captured and
	// decoded once the object is read, if the id says it is ours: the last
	// given stands, as with json.Unmarshal, and another call's error is
	// never decoded.
	var pending, pendingErr [][]byte
	var gaveResult, gaveError bool
	_, refused, err := d.readObject("the reply", func(key []byte) (error, error) {
		var err error
		ours := rep.index >= 0 || answered == nil
		switch {
		case string(key) == "error" && ours && !gaveError:
			gaveError = true
			rep.err, err = d.readError()
		case string(key) == "error" && (ours || !idRead):
			gaveError = true
			pendingErr, err = d.capture()
		case string(key) == "result" && rep.index >= 0 && !gaveResult:
			// Streamed: a dense result is read element by element, so
			// that the reader holds one token, never the whole result.
			gaveResult, rep.result = true, true
			rep.decodeErr, err = d.readResult(elems[rep.index].Result)
		case string(key) == "result" && (rep.index >= 0 || !idRead):
			gaveResult, rep.result = true, true
			pending, err = d.capture()
		case string(key) == "id" && !idRead:
			var id []byte
			if id, err = d.valueUpTo(maxID); err == nil {
				idRead = true
				rep.takeID(id, base, answered)
			}
		default:
			err = d.skip()
		}
		return nil, err
	})
	switch {
	case err != nil:
		return rep, err
	case refused != nil:
		return rep, refused
	}
	if pendingErr != nil && (rep.index >= 0 || answered == nil) {
		if rep.err, err = newBytesReader(pendingErr...).readError(); err != nil {
			return rep, err
		}
	}
	if pending != nil && rep.index >= 0 {
		p := newBytesReader(pending...)
		if rep.decodeErr, err = p.readResult(elems[rep.index].Result); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// takeID takes the element the reply's id names (readReply): with
// answered nil (a lone call) none; with an id too long to be ours, none.
func (rep *reply) takeID(id []byte, base int64, answered []bool) {
	if answered == nil {
		return
	}
	rep.index = elementOf(id, base, len(answered))
	if rep.index >= 0 && answered[rep.index] {
		rep.index = -1 // a repeat: the first reply stands
	}
}

// elementOf is the element an id names: an integer in [base, base+n),
// less base, or -1.
func elementOf(id json.RawMessage, base int64, n int) int {
	i, err := strconv.ParseInt(string(bytes.Trim(id, `"`)), 10, 64)
	if err != nil || i < base || i-base >= int64(n) {
		return -1
	}
	return int(i - base)
}
