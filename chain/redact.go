package chain

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/burnpoller/burnpoller/internal/redact"
)

// redacted replaces every secret-bearing part of a URL.
const redacted = redact.Redacted

// plainSegment matches path segments that carry no credentials: short words
// and version markers such as "v3", "rpc" or "mainnet".
var plainSegment = regexp.MustCompile(`^[A-Za-z][A-Za-z-]{0,15}[0-9]{0,2}$`)

// RedactURL returns rawURL fit for logs and metrics: user info, query values
// and any path segment that could be an API key (providers put keys in the
// path, as in /v3/<key>) are replaced. Scheme, host and port stay.
func RedactURL(rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" {
		return "(unparseable URL)"
	}
	out := url.URL{Scheme: u.Scheme, Host: redact.Host(u.Host)}
	if u.User != nil {
		out.User = url.User(redacted)
	}
	if u.Path != "" {
		segs := strings.Split(u.Path, "/")
		for i, s := range segs {
			if s != "" && !plainSegment.MatchString(s) {
				segs[i] = redacted
			}
		}
		out.Path = strings.Join(segs, "/")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		out.RawQuery = q.Encode()
	}
	return out.String()
}

// redactError hides rawURL inside err's text (net/http quotes request URLs in
// its errors) while keeping err reachable for errors.Is and errors.As.
func redactError(err error, rawURL, display string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := scrub(msg, rawURL, display)
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

func scrub(msg, rawURL, display string) string {
	secrets := []string{strings.TrimSpace(rawURL)}
	if u, err := url.Parse(strings.TrimSpace(rawURL)); err == nil {
		secrets = append(secrets, u.String(), u.Redacted())
		if u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				secrets = append(secrets, p)
			}
			secrets = append(secrets, u.User.Username())
		}
		for _, s := range strings.Split(u.Path, "/") {
			if s != "" && !plainSegment.MatchString(s) {
				secrets = append(secrets, s)
			}
		}
		for _, l := range strings.Split(u.Hostname(), ".") {
			if redact.Host(l) != l {
				secrets = append(secrets, l)
			}
		}
		for _, vs := range u.Query() {
			secrets = append(secrets, vs...)
		}
	}
	// Longest first, so a full URL is replaced before its parts.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) < 4 {
			continue
		}
		if s == rawURL || strings.Contains(s, "://") {
			msg = strings.ReplaceAll(msg, s, display)
		} else {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
