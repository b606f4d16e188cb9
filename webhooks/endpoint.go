package webhooks

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/burnpoller/burnpoller/internal/redact"
	"github.com/burnpoller/burnpoller/payments"
)

// Endpoint is one webhook URL and the label that stands for it everywhere
// it could be seen (logs, metrics, the database, command output): URLs carry
// tokens.
type Endpoint struct {
	URL   string
	Label string
	// legacy is the label before token-like host labels were hidden, when
	// it differs (legacyLabel): a row registered under it is carried on.
	legacy string
}

// ParseEndpoints checks a comma-separated WEBHOOK_URL value. Errors never
// quote the URL.
func ParseEndpoints(list string) ([]Endpoint, error) {
	var out []Endpoint
	for i, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			return nil, fmt.Errorf("entry %d is empty", i+1)
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			return nil, fmt.Errorf("entry %d is not a URL", i+1)
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("entry %d: scheme must be http or https", i+1)
		case u.Host == "" || u.Hostname() == "":
			return nil, fmt.Errorf("entry %d has no host", i+1)
		case u.Fragment != "":
			return nil, fmt.Errorf("entry %d has a fragment", i+1)
		}
		e := Endpoint{URL: raw, Label: Label(u), legacy: legacyLabel(u)}
		if slices.ContainsFunc(out, func(o Endpoint) bool { return o.Label == e.Label }) {
			return nil, fmt.Errorf("entry %d repeats an earlier one", i+1)
		}
		out = append(out, e)
	}
	return out, nil
}

// Label names u without what may be secret in it (user info, path, query,
// host labels that look like tokens, as in https://<token>.m.pipedream.net):
// scheme://host[:port], its token-like labels hidden as RPC URLs' are
// (redact.Host), and a short hash of the whole URL, so that two
// endpoints on one host differ.
func Label(u *url.URL) string {
	return u.Scheme + "://" + redact.Host(u.Host) + "#" + urlHash(u)
}

// legacyLabel is the label u had before token-like host labels were
// hidden, the key of its row in a database registered then; "" when it is
// u's label still.
func legacyLabel(u *url.URL) string {
	if l := u.Scheme + "://" + u.Host + "#" + urlHash(u); l != Label(u) {
		return l
	}
	return ""
}

// urlHash is the first 8 hex digits of sha256(u).
func urlHash(u *url.URL) string {
	sum := sha256.Sum256([]byte(u.String()))
	return hex.EncodeToString(sum[:4])
}

// ParseEvents checks a comma-separated WEBHOOK_EVENTS value.
func ParseEvents(list string) ([]string, error) {
	var out []string
	for k := range strings.SplitSeq(list, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(payments.Kinds, k) {
			return nil, fmt.Errorf("%q is not one of seen, retracted, confirmed", k)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no event kind")
	}
	return out, nil
}

// Back-off bounds between attempts.
const (
	minBackoff = time.Second
	maxBackoff = time.Hour
)

// Backoff is the wait after failed attempt number attempt (1 for the
// first): 1 s doubling up to 1 h, with jitter (r in [0, 1)) taking it
// anywhere in its upper half, so that deliveries failing together spread out.
func Backoff(attempt int, r float64) time.Duration {
	d := maxBackoff
	if attempt < 13 { // 2^12 s > 1 h
		d = min(minBackoff<<max(attempt-1, 0), maxBackoff)
	}
	return d/2 + time.Duration(r*float64(d/2))
}

func jitter() float64 { return rand.Float64() } //nolint:gosec // back-off jitter, not a secret
