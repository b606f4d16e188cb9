package chain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
)

func (c *Client) call(ctx context.Context, result any, method string, args ...any) error {
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := c.roundTrip(rctx,
		func() error { return c.httpCall(rctx, c.httpc, result, method, args) },
		func(w *wsConn) error { return w.call(rctx, result, method, args) })
	if err != nil {
		res, e := c.failure(ctx, err, method)
		c.opts.Observer.RPC(c.display, method, res, time.Since(start))
		return e
	}
	c.answered.Store(time.Now().UnixNano())
	c.opts.Observer.RPC(c.display, method, ResultOK, time.Since(start))
	return nil
}

func (c *Client) batch(ctx context.Context, elems []rpc.BatchElem) error {
	if len(elems) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := c.roundTrip(rctx,
		func() error { return c.httpBatch(rctx, c.httpc, elems) },
		func(w *wsConn) error { return w.batch(rctx, elems) })
	took := time.Since(start)
	if err != nil {
		res, e := c.failure(ctx, err, "batch")
		for _, el := range elems {
			c.opts.Observer.RPC(c.display, el.Method, res, took)
		}
		return e
	}
	c.answered.Store(time.Now().UnixNano())
	var first *Error
	for _, el := range elems {
		if el.Error == nil {
			c.opts.Observer.RPC(c.display, el.Method, ResultOK, took)
			continue
		}
		e := classify(redactError(el.Error, c.rawURL, c.display), c.display, el.Method)
		c.opts.Observer.RPC(c.display, el.Method, string(e.Class), took)
		if first == nil {
			first = e
		}
	}
	if first != nil {
		return first
	}
	return nil
}

// roundTrip sends a request: overHTTP for an HTTP endpoint, overWS on
// the WebSocket connection, dialled if need be, and once more on a new
// one if the connection was lost before the request was written (another
// request's reply broke it in between). A closed client sends nothing.
func (c *Client) roundTrip(ctx context.Context, overHTTP func() error, overWS func(*wsConn) error) error {
	for try := 0; ; try++ {
		w, err := c.conn(ctx)
		switch {
		case err != nil:
			return err
		case c.httpc != nil:
			return overHTTP()
		}
		err = overWS(w)
		if !errors.Is(err, errNotSent) || try == 1 {
			return err
		}
	}
}

// failure turns a failed request into the error to return and the result
// to observe. When the caller's ctx has ended, the node is not at fault:
// the error wraps ctx's (context.Canceled or context.DeadlineExceeded) and
// is no *Error. Otherwise, the request timeout included, it is classified.
func (c *Client) failure(ctx context.Context, err error, method string) (result string, _ error) {
	if ctx.Err() != nil {
		return ResultCanceled, fmt.Errorf("%s on %s: %w", method, c.display, ctx.Err())
	}
	e := classify(redactError(err, c.rawURL, c.display), c.display, method)
	return string(e.Class), e
}

// badReply wraps a validation failure as an *Error of ClassBadReply.
func (c *Client) badReply(method string, err error) error {
	c.opts.Observer.BadReply(c.display, method)
	return &Error{Class: ClassBadReply, Endpoint: c.display, Method: method, Err: err}
}
