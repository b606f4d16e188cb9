package chain

import (
	"net/url"
	"regexp"
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
// path, as in /v3/<key>) are replaced, and so is a query parameter's name
// when it could be one: a parameter without a value (?<key>, ?<key>=) or a
// name that is not a plain word (see queryName). Scheme, host and port
// stay, the host's token-like labels hidden (redact.Host).
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
		out.RawQuery = redactQuery(u.RawQuery)
	}
	return out.String()
}

// redactQuery shows a raw query as name=xxxxx for each name it shows, once
// and sorted (as url.Values.Encode writes them, so that a URL without a
// hidden name keeps the label it had), then one xxxxx for whatever
// parameters it hides.
func redactQuery(rawQuery string) string {
	q := url.Values{}
	hidden := false
	for p := range strings.SplitSeq(rawQuery, "&") {
		if name, ok := shownName(p); ok {
			q.Set(name, redacted)
		} else if p != "" {
			hidden = true
		}
	}
	shown := q.Encode()
	if !hidden {
		return shown
	}
	if shown == "" {
		return redacted
	}
	return shown + "&" + redacted
}

// queryName matches a query parameter's name that is a plain word (apikey,
// api_key, x-api-key, token, access_token, chain.id): a letter, then up to
// 31 letters, digits, dots, hyphens or underscores.
var queryName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,31}$`)

// shownName is the name of query parameter param ("name=value") when
// RedactURL shows it: a plain word (queryName) that does not look like a
// key (redact.KeyLike), given a value. A parameter without a value is a
// bare key (?<key>): providers that take the key as the whole query.
func shownName(param string) (string, bool) {
	raw, value, ok := strings.Cut(param, "=")
	if !ok || value == "" {
		return "", false
	}
	name, err := url.QueryUnescape(raw)
	if err != nil || !queryName.MatchString(name) || redact.KeyLike(name) {
		return "", false
	}
	return name, true
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

// scrub replaces, in msg, rawURL (as given, as parsed, and without its
// user info, as a WebSocket handshake dials it) by display, and every
// secret part of it that RedactURL hides by xxxxx: user info, path
// segments, host labels, query values, the names it does not show and the
// fragment.
func scrub(msg, rawURL, display string) string {
	raw := strings.TrimSpace(rawURL)
	urls := []string{rawURL, raw}
	var parts []string
	if u, err := url.Parse(raw); err == nil {
		urls = append(urls, u.String(), u.Redacted())
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				parts = append(parts, p, url.QueryEscape(p))
				// net/http's errors show the password as *** (its
				// stripPassword).
				urls = append(urls, strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1))
			}
			parts = append(parts, u.User.Username(), u.User.String())
			bare := *u
			bare.User = nil
			urls = append(urls, bare.String())
		}
		for _, path := range []string{u.Path, u.EscapedPath()} {
			for s := range strings.SplitSeq(path, "/") {
				if s != "" && !plainSegment.MatchString(s) {
					parts = append(parts, s)
				}
			}
		}
		parts = append(parts, redact.HiddenHostLabels(u.Host)...)
		parts = append(parts, querySecrets(u.RawQuery)...)
		parts = append(parts, u.Fragment, u.EscapedFragment())
	}
	return redact.Scrub(msg, display, urls, parts)
}

// querySecrets are the parts of a raw query RedactURL hides, raw and
// unescaped: every value, and the names it does not show.
func querySecrets(rawQuery string) []string {
	var out []string
	for p := range strings.SplitSeq(rawQuery, "&") {
		name, value, _ := strings.Cut(p, "=")
		if _, ok := shownName(p); !ok {
			out = append(out, name)
			if n, err := url.QueryUnescape(name); err == nil {
				out = append(out, n)
			}
		}
		out = append(out, value)
		if v, err := url.QueryUnescape(value); err == nil {
			out = append(out, v)
		}
	}
	return out
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
