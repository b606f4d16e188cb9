package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// A node's error is read only as far as it is used, so that no reply,
// inside the reply cap, can make the client build more than a small
// multiple of it: decoded into Go maps and slices, 7 MiB of [{},{},…] in an
// error's data grew the heap by over 300 MiB.
const (
	// maxErrorText is how much of a node's text is kept: an error's
	// message, each string of its data, and the text of an *Error. Every
	// provider's reply we match (Alchemy's suggested range, at about 270
	// bytes, the longest) fits.
	maxErrorText = 512
	// maxErrorData is the longest error data read; longer data is dropped.
	maxErrorData = 4 << 10
	// maxDataFields is how many fields of an object data are kept.
	maxDataFields = 16
	// maxErrorBody is how much of a non-2xx reply's body is read for the
	// JSON-RPC error it may carry; its text in an *Error is cut at
	// maxErrorText.
	maxErrorBody = 64 << 10
)

// replyError is a JSON-RPC error object of a reply: an rpc.Error and an
// rpc.DataError, as go-ethereum's own, for classify. Its message is cut
// at maxErrorText and its data holds only what classify reads (errorData).
type replyError struct {
	Code    int        `json:"code"`
	Message errorText  `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

func (e *replyError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("json-rpc error %d", e.Code)
	}
	return string(e.Message)
}

// ErrorCode is the JSON-RPC error code.
func (e *replyError) ErrorCode() int { return e.Code }

// ErrorData is the error's data as far as it is read (errorData), or nil.
func (e *replyError) ErrorData() any {
	if e.Data == nil {
		return nil
	}
	return e.Data.v
}

// errorText is a node's string cut at maxErrorText bytes.
type errorText string

// UnmarshalJSON keeps the first maxErrorText bytes of a JSON string.
func (t *errorText) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = errorText(cutText(s, maxErrorText))
	return nil
}

// errorData is a JSON-RPC error's data as far as classify reads it: a
// string, or of an object its first maxDataFields string fields and
// Infura's rate.backoff_seconds. Data longer than maxErrorData bytes or of
// another shape is nil: the decoder hands it over in its own buffer, and
// nothing is built from it.
type errorData struct{ v any }

// UnmarshalJSON reads b as far as classify needs; it never fails.
func (d *errorData) UnmarshalJSON(b []byte) error {
	d.v = boundedData(b)
	return nil
}

// boundedData is what classify reads of raw, an error's data (errorData).
func boundedData(raw []byte) any {
	if len(raw) > maxErrorData {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return nil
	case raw[0] == '"':
		var s errorText
		if s.UnmarshalJSON(raw) != nil {
			return nil
		}
		return string(s)
	case raw[0] != '{':
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	out := make(map[string]any, min(len(fields), maxDataFields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if len(out) == maxDataFields {
			break
		}
		v := bytes.TrimSpace(fields[k])
		switch {
		case len(v) > 0 && v[0] == '"':
			var s errorText
			if s.UnmarshalJSON(v) == nil {
				out[k] = string(s)
			}
		case k == "rate":
			var rate struct {
				Backoff *float64 `json:"backoff_seconds"`
			}
			if json.Unmarshal(v, &rate) == nil && rate.Backoff != nil {
				out[k] = map[string]any{"backoff_seconds": *rate.Backoff}
			}
		}
	}
	return out
}

// cutText is s cut to at most n bytes on a rune boundary, saying how much
// was cut; a cut string is a copy, so s's memory is not held.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strings.Clone(s[:i]) + fmt.Sprintf("… (%d bytes cut)", len(s)-i)
}
