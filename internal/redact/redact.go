// Package redact hides the parts of a host name that look like secrets:
// some RPC providers and webhook services put an API key or a token in a
// subdomain. It is the one rule the chain package (RPC URLs) and the
// webhooks package (endpoint labels) share, and imports nothing.
package redact

import (
	"net"
	"regexp"
	"strings"
	"unicode"
)

// Redacted replaces every secret-bearing part.
const Redacted = "xxxxx"

// keyLike matches a host label that looks like an API key rather than a
// name, once it mixes letters and digits: long, or not quite as long with
// neither hyphen nor underscore (Pipedream's ids are 15 characters), where
// names with digits are short or hyphenated (bsc-dataseed1, node42).
var keyLike = regexp.MustCompile(`^(?:[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{12,})$`)

// Host returns host, a name or an address with or without a port, with
// every label that looks like an API key or a token replaced by xxxxx.
func Host(host string) string {
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	}
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return host
	}
	labels := strings.Split(name, ".")
	for i, l := range labels {
		if keyLike.MatchString(l) && strings.ContainsAny(l, "0123456789") && strings.IndexFunc(l, unicode.IsLetter) >= 0 {
			labels[i] = Redacted
		}
	}
	name = strings.Join(labels, ".")
	if port != "" {
		return net.JoinHostPort(name, port)
	}
	return name
}
