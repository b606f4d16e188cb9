package chain_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/burnpoller/burnpoller/chain"
	"github.com/burnpoller/burnpoller/internal/redact"
)

// FuzzRedactURL: how an RPC URL is shown (logs, metric labels, poller
// config) and what an error quoting it becomes never hold its user info,
// a query value, a bare query key (?<key>) or a query name that looks
// like a key, unless the same text is also in a part that is shown: the
// scheme, the host with its token-like labels hidden, a plain path
// segment, a plain query name.
func FuzzRedactURL(f *testing.F) {
	f.Add("https://node.example/rpc?Zx81kQ0pLmN2vB7c")
	f.Add("https://node.example/rpc?Zx81kQ0pLmN2vB7c=")
	f.Add("https://node.example/rpc?chain=1&Zx81kQ0pLmN2vB7c")
	f.Add("https://node.example/rpc?Zx81kQ0pLmN2vB7c=1&apikey=s3cret")
	f.Add("wss://u:p4ssword@node.example/ws/0123456789abcdef?token=t0k3n&bare-key-0123")
	f.Add("https://node.example/rpc?k%65y0123456789ab&%zz")
	f.Add("https://node.example/rpc?a=%22quoted%22&b=%E2%82%AC-euro")
	f.Add("https://a1b2c3d4e5f6a7b8c9d0.eth.rpc.rivet.cloud/v3/x?x#fragment-0123")
	f.Add("http://127.0.0.1:8545/?;semi=colon;")
	f.Fuzz(func(t *testing.T, raw string) {
		shown := chain.RedactURL(raw)
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			if shown != "(unparseable URL)" {
				t.Fatalf("RedactURL(%q) = %q for a URL that does not parse", raw, shown)
			}
			return
		}
		public, secrets := urlParts(u)
		msgs := map[string]string{
			"shown": shown,
			"error": chain.Scrub(fmt.Sprintf("Post %q: dial tcp %s: %s refused", u.String(), u.Host, raw), raw),
		}
		for what, text := range msgs {
			for _, s := range secrets {
				if len(s) < 4 || strings.Contains(s, redact.Redacted) || strings.Contains(s, "Post") || strings.Contains(s, "dial tcp") || strings.Contains(s, "refused") {
					continue
				}
				if strings.Contains(text, s) && !strings.Contains(public, s) {
					t.Fatalf("%s %q for %q holds the secret %q", what, text, raw, s)
				}
			}
		}
	})
}

// plainPathSegment is RedactURL's rule for a path segment it shows.
var plainPathSegment = regexp.MustCompile(`^[A-Za-z][A-Za-z-]{0,15}[0-9]{0,2}$`)

// urlParts splits u into what may be shown (one string of every part) and
// its secrets: user info, query values, the names of parameters without a
// value and names that look like keys.
func urlParts(u *url.URL) (public string, secrets []string) {
	// The URL's shown part before its query, as written (escaped), with
	// the separators.
	before := url.URL{Scheme: u.Scheme, Host: redact.Host(u.Host)}
	if u.User != nil {
		before.User = url.User(redact.Redacted)
	}
	segs := strings.Split(u.Path, "/")
	for i, s := range segs {
		if s != "" && !plainPathSegment.MatchString(s) {
			segs[i] = redact.Redacted
		}
	}
	before.Path = strings.Join(segs, "/")
	shown := append([]string{u.Scheme, redact.Host(u.Host), before.String() + "?"}, segs...)
	if u.User != nil {
		p, _ := u.User.Password()
		secrets = append(secrets, u.User.Username(), p)
	}
	secrets = append(secrets, redact.HiddenHostLabels(u.Host)...)
	for p := range strings.SplitSeq(u.RawQuery, "&") {
		rawName, rawValue, _ := strings.Cut(p, "=")
		name, _ := url.QueryUnescape(rawName)
		value, _ := url.QueryUnescape(rawValue)
		secrets = append(secrets, rawValue, value)
		if rawValue == "" || redact.KeyLike(name) {
			secrets = append(secrets, rawName, name)
		} else {
			shown = append(shown, name, url.QueryEscape(name))
		}
	}
	return strings.Join(shown, "\n"), secrets
}
