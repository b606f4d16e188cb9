package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/gorilla/websocket"
)

// Class is the kind of a failed call, which decides how the caller retries.
type Class string

// The classes of failure.
const (
	// ClassThrottled: the provider asks us to slow down (HTTP 429/503, rate
	// limit codes). Honour RetryAfter, back off with jitter.
	ClassThrottled Class = "throttled"
	// ClassTransient: timeouts, resets, 5xx, a node not synced: back off.
	ClassTransient Class = "transient"
	// ClassPermanent: authentication, unknown method, invalid parameters:
	// retrying will not help until someone changes something.
	ClassPermanent Class = "permanent"
	// ClassRangeLimit: the block range or the result set is too large.
	ClassRangeLimit Class = "range_limit"
	// ClassBadReply: the reply contradicts the request or the chain.
	ClassBadReply Class = "bad_reply"
	// ClassPruned: the endpoint no longer serves the blocks asked for
	// (EIP-4444 history expiry, a pruned node): another endpoint must.
	ClassPruned Class = "history_pruned"
)

// Error is a failed call to one endpoint.
type Error struct {
	Class    Class
	Endpoint string // redacted
	Method   string
	// RetryAfter is the provider's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Limit is the parsed range-limit reply, for ClassRangeLimit.
	Limit RangeLimit
	Err   error
	// cut is what an eth_getLogs reply over the cap showed before it was
	// cut off (HTTP only), for sizing the next range.
	cut *cutReply
}

// cutReply is how far an eth_getLogs reply over the cap got: the block of
// its first log, the blocks it held whole from there and their logs, and
// whether it held any log at all.
type cutReply struct {
	first  uint64
	blocks uint64
	logs   int
	seen   bool
}

// Error says what failed where; the cause's text is cut at maxErrorText
// bytes, since it may quote what a node sent (a non-2xx body).
func (e *Error) Error() string {
	cause := "<nil>"
	if e.Err != nil {
		cause = cutText(e.Err.Error())
	}
	return fmt.Sprintf("%s on %s: %s: %s", e.Method, e.Endpoint, e.Class, cause)
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err: an *Error's own, ClassBadReply for
// ErrBadReply, else ClassTransient.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	if errors.Is(err, ErrBadReply) {
		return ClassBadReply
	}
	return ClassTransient
}

// RetryAfterOf returns the Retry-After carried by err, or zero.
func RetryAfterOf(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// maxRetryAfter caps what a provider may ask for.
const maxRetryAfter = 5 * time.Minute

// classify turns a transport or JSON-RPC error into an *Error.
func classify(err error, endpoint, method string) *Error {
	e := &Error{Class: ClassTransient, Endpoint: endpoint, Method: method, Err: err}
	var (
		httpErr  rpc.HTTPError
		rpcErr   rpc.Error
		netErr   net.Error
		code     int
		message  string
		data     any
		isRPCErr bool
	)
	switch {
	case errors.Is(err, ErrBadReply):
		e.Class = ClassBadReply
		return e
	case errors.Is(err, ErrResponseTooLarge) || strings.Contains(err.Error(), ErrResponseTooLarge.Error()):
		e.Class = ClassRangeLimit
		return e
	case errors.Is(err, websocket.ErrReadLimit):
		// A WebSocket reply over the cap: the connection is closed, every
		// call waiting on it gets this error, and the next call dials again.
		e.Class = ClassRangeLimit
		e.Err = fmt.Errorf("%w: %w", ErrResponseTooLarge, err)
		return e
	case errors.As(err, &httpErr):
		// The body of a non-2xx reply may still carry a JSON-RPC error.
		code, message, data, isRPCErr = bodyError(httpErr.Body)
		e.RetryAfter = max(retryAfterFromStatus(httpErr.Status), backoffFromData(data))
		switch st := httpErr.StatusCode; {
		case st == http.StatusTooManyRequests, st == http.StatusServiceUnavailable:
			e.Class = ClassThrottled
		case st == http.StatusUnauthorized, st == http.StatusForbidden, st == http.StatusPaymentRequired:
			e.Class = ClassPermanent
		case isRPCErr:
			e.Class = classifyRPC(code, message, data, &e.Limit)
			e.Err = prunedErr(e.Class, err)
		case st == http.StatusRequestEntityTooLarge:
			e.Class = ClassRangeLimit
		case st == http.StatusNotFound, st == http.StatusMethodNotAllowed, st == http.StatusBadRequest:
			e.Class = ClassPermanent
		default:
			e.Class = ClassTransient
		}
		return e
	case errors.As(err, &rpcErr):
		code, message = rpcErr.ErrorCode(), rpcErr.Error()
		var de rpc.DataError
		if errors.As(err, &de) {
			data = de.ErrorData()
		}
		e.Class = classifyRPC(code, message, data, &e.Limit)
		e.Err = prunedErr(e.Class, err)
		e.RetryAfter = backoffFromData(data)
		return e
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.As(err, &netErr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		e.Class = ClassTransient
		return e
	}
	return e
}

// classifyRPC classes a JSON-RPC error object by its code and message.
func classifyRPC(code int, message string, data any, limit *RangeLimit) Class {
	if isHistoryPruned(code, message, data) {
		return ClassPruned
	}
	if isRangeLimit(message, data, limit) {
		return ClassRangeLimit
	}
	msg := strings.ToLower(message)
	switch {
	case containsAny(msg, "rate limit", "too many requests", "request rate", "requests per second", "request limit reached",
		"compute units per second", "capacity", "throttl", "busy", "overloaded", "try again later", "credits limited", "/sec"):
		return ClassThrottled
	case containsAny(msg, "beyond current head", "beyond the current head"):
		// geth's -32602 for a range past the node's head: a node behind
		// the one that named the block (a balancer's), not a bad request.
		return ClassTransient
	case containsAny(msg, "unauthorized", "forbidden", "api key", "apikey", "project id", "invalid token", "token is invalid",
		"personal token", "not allowed", "access denied", "must be authenticated", "not whitelisted", "disabled",
		"payment required", "credit limit", "invalid jwt"):
		return ClassPermanent
	}
	switch code {
	case -32005: // Infura, MetaMask: "limit exceeded" (rate); range replies were matched above
		return ClassThrottled
	case -32007, -32029, 429: // Alchemy and others: request rate exceeded
		return ClassThrottled
	case -32601, -32602, -32600, -32700: // method not found, invalid params or request, parse error
		return ClassPermanent
	}
	return ClassTransient
}

// prunedErr makes a pruned-history reply match ErrHistoryPruned.
func prunedErr(c Class, err error) error {
	if c == ClassPruned {
		return fmt.Errorf("%w: %w", ErrHistoryPruned, err)
	}
	return err
}

// backoffFromData reads Infura's {"rate": {"backoff_seconds": N}} hint.
func backoffFromData(data any) time.Duration {
	m, _ := data.(map[string]any)
	rate, _ := m["rate"].(map[string]any)
	secs, ok := rate["backoff_seconds"].(float64)
	if !ok || secs <= 0 || secs != secs {
		return 0
	}
	return min(time.Duration(secs*float64(time.Second)), maxRetryAfter)
}

// bodyError extracts the JSON-RPC error from a non-2xx reply body; ok is
// false when the body is not one. Its message and data are read only as
// far as classify uses them (readError).
func bodyError(body []byte) (code int, message string, data any, ok bool) {
	d := newBytesReader(body)
	var e *replyError
	_, refused, err := d.readObject("the body", func(key []byte) (error, error) {
		if !foldEqual(key, "error") {
			return nil, d.skip()
		}
		null, err := d.null()
		if err != nil || null {
			e = nil
			return nil, err
		}
		e, err = d.readError()
		return nil, err
	})
	if _, more := d.peek(); err != nil || refused != nil || more || e == nil {
		return 0, "", nil, false
	}
	return e.Code, string(e.Message), e.ErrorData(), true
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ErrResponseTooLarge means a reply was cut off at MaxResponseBytes (over
// HTTP, the body; over WebSocket, the message): the range asked for holds
// too many logs to read safely.
var ErrResponseTooLarge = errors.New("reply larger than the response limit")

// MaxResponseBytes is the default cap on a reply body, so that a dense range
// cannot make the process read (and hold) an unbounded reply; beyond it, the
// range shrinks.
const MaxResponseBytes = 8 << 20

// retryAfterTransport notes a 429 or 503 reply's Retry-After in the
// response's status line, the one part of a non-2xx reply go-ethereum's RPC
// client passes on (as rpc.HTTPError.Status), and caps reply bodies at
// limit bytes.
type retryAfterTransport struct {
	base  http.RoundTripper
	limit int64
}

// cappedBody fails a read past its limit with ErrResponseTooLarge, and
// feeds what it reads to scan, if set.
type cappedBody struct {
	io.ReadCloser
	left int64
	scan *logScan
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.scan != nil && n > 0 {
		b.scan.feed(p[:n])
	}
	return n, err
}

const retryAfterMark = " retry-after-ms="

// RoundTrip sends req and marks the provider's Retry-After on a refusal.
func (t retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: t.limit, scan: logScanOf(req.Context())}
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return resp, nil
	}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		resp.Status += retryAfterMark + strconv.FormatInt(d.Milliseconds(), 10)
	}
	return resp, nil
}

var retryAfterInStatus = regexp.MustCompile(regexp.QuoteMeta(retryAfterMark) + `(\d+)$`)

func retryAfterFromStatus(status string) time.Duration {
	m := retryAfterInStatus.FindStringSubmatch(status)
	if m == nil {
		return 0
	}
	ms, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// The result is capped at five minutes.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs != secs {
			return 0, false
		}
		d = time.Duration(min(secs, maxRetryAfter.Seconds()) * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}
