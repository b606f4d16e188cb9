// Package webhooks delivers payment events to HTTP endpoints: durably (the
// delivery state lives in Postgres), at least once, signed.
package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header names, as documented.
const (
	HeaderEventID   = "Burnpoller-Event-Id"
	HeaderSignature = "Burnpoller-Signature"
)

// Sign returns the Burnpoller-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with secret>",
// the scheme Stripe uses.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// ErrBadSignature is returned by Verify for a signature that does not match.
var ErrBadSignature = errors.New("webhook signature does not verify")

// Verify checks a Burnpoller-Signature header against body and secret, and
// that its timestamp is within tolerance of now (0 skips the age check). Any
// of several v1 values may match (a receiver rotating secrets sees one per
// secret in other schemes; burnpoller sends one).
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header", ErrBadSignature)
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return fmt.Errorf("%w: timestamp %d is %s away from now", ErrBadSignature, sec, d.Round(time.Second))
		}
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrBadSignature
}
