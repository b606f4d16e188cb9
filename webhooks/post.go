package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/burnpoller/burnpoller/payments"
)

// responseCap is how much of a response body is read (and dropped), so that
// the connection can be reused without reading an endless answer.
const responseCap = 64 << 10

// responseHeaderCap caps a response's headers, which responseCap does not
// cover: net/http's default of 10 MiB let one answer of short header lines
// cost 130 MiB. An answer over it fails the attempt, as no answer would.
const responseHeaderCap = 64 << 10

// post sends ev to e once. It returns the HTTP status (0 without an
// answer) and, unless the answer was 2xx, what went wrong (e.problem):
// the endpoint named by its label, never its URL or host.
func (d *Dispatcher) post(ctx context.Context, e Endpoint, ev payments.Event) (int, string) {
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, e.problem("encoding the event: " + err.Error())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return 0, e.problem("building the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "burnpoller-webhooks")
	req.Header.Set(HeaderEventID, ev.EventID)
	req.Header.Set(HeaderSignature, Sign(d.cfg.Secret, time.Now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, e.problem(describe(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, responseCap))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, e.problem("HTTP " + strconv.Itoa(resp.StatusCode))
	}
	return resp.StatusCode, ""
}
