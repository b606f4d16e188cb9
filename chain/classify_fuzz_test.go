package chain

import (
	"testing"
	"time"
)

// FuzzClassifyReply feeds arbitrary provider error replies (a non-2xx body,
// a Retry-After header) to the error classification: it must never panic,
// always name one of the classes, agree with ParseRangeLimit on range
// limits, and keep Retry-After and backoff hints within their cap.
func FuzzClassifyReply(f *testing.F) {
	for _, s := range []struct{ body, retryAfter string }{
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"project ID request rate exceeded","data":{"rate":{"backoff_seconds":30}}}}`, "5"},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"query returned more than 10000 results","data":{"from":"0x1","to":"0x2"}}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":429,"message":"Your app has exceeded its compute units per second capacity"}}`, "Wed, 21 Oct 2015 07:28:00 GMT"},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"exceed maximum block range: 50000"}}`, ""},
		{`{"error":{"code":-32602,"message":"invalid params","data":[1,2,3]}}`, "-1"},
		{`<html>502 Bad Gateway</html>`, "NaN"},
		{`{"error":null}`, "1e309"},
	} {
		f.Add([]byte(s.body), s.retryAfter)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, retryAfter string) {
		if d, ok := ParseRetryAfter(retryAfter, now); ok && (d < 0 || d > maxRetryAfter) {
			t.Fatalf("Retry-After %q parsed to %s", retryAfter, d)
		}
		code, message, data, ok := bodyError(body)
		if !ok {
			return
		}
		if d := backoffFromData(data); d < 0 || d > maxRetryAfter {
			t.Fatalf("backoff hint %v gave %s", data, d)
		}
		var l RangeLimit
		class := classifyRPC(code, message, data, &l)
		switch class {
		case ClassThrottled, ClassTransient, ClassPermanent, ClassRangeLimit:
		default:
			t.Fatalf("class %q for %d %q", class, code, message)
		}
		if _, isLimit := ParseRangeLimit(code, message, data); isLimit != (class == ClassRangeLimit) {
			t.Fatalf("classified %s, but ParseRangeLimit says range limit = %v, for %d %q %v", class, isLimit, code, message, data)
		}
	})
}
