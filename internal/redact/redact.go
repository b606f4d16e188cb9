// Package redact hides the parts of a URL that look like secrets: some RPC
// providers and webhook services put an API key or a token in a subdomain,
// a query parameter's name or value, and error texts quote URLs and host
// names. It is the one rule the chain package (RPC URLs), the webhooks
// package (endpoint labels, delivery errors) and the database package
// (runtime parameters) share, and imports nothing of ours.
package redact

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Redacted replaces every secret-bearing part.
const Redacted = "xxxxx"

// keyLike matches a word that looks like an API key rather than a name,
// once it mixes letters and digits: long, or not quite as long with
// neither hyphen nor underscore (Pipedream's ids are 15 characters), where
// names with digits are short or hyphenated (bsc-dataseed1, node42).
var keyLike = regexp.MustCompile(`^(?:[A-Za-z0-9_-]{16,}|[A-Za-z0-9]{12,})$`)

// KeyLike says word (a host label, a query parameter's name) looks like an
// API key or a token rather than a name: see keyLike.
func KeyLike(word string) bool {
	return keyLike.MatchString(word) && strings.ContainsAny(word, "0123456789") && strings.IndexFunc(word, unicode.IsLetter) >= 0
}

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
		if KeyLike(l) {
			labels[i] = Redacted
		}
	}
	name = strings.Join(labels, ".")
	if port != "" {
		return net.JoinHostPort(name, port)
	}
	return name
}

// HiddenHostLabels are the labels of host that Host hides.
func HiddenHostLabels(host string) []string {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return nil
	}
	var out []string
	for l := range strings.SplitSeq(name, ".") {
		if KeyLike(l) {
			out = append(out, l)
		}
	}
	return out
}

// minSecret is the shortest part Scrub replaces: a shorter one is no
// secret to speak of, and would be found inside ordinary words.
const minSecret = 4

// Scrub returns msg with every occurrence of each of urls (whole URLs, in
// the forms they may be quoted in) replaced by label, and of each of parts
// (the URL's secret parts) by xxxxx. Each is also looked for as Go's %q
// writes it (net/http's errors quote the request URL with %q, escaping
// quotes and non-ASCII bytes). It is one pass, longest first: a whole URL
// is replaced before its parts, and what was put in is not replaced again.
// Parts shorter than 4 bytes are left alone.
func Scrub(msg, label string, urls, parts []string) string {
	type secret struct{ s, by string }
	var all []secret
	add := func(s, by string) {
		if len(s) < minSecret {
			return
		}
		all = append(all, secret{s, by})
		if q := strconv.Quote(s); q[1:len(q)-1] != s {
			all = append(all, secret{q[1 : len(q)-1], by})
		}
	}
	for _, u := range urls {
		add(u, label)
	}
	for _, p := range parts {
		add(p, Redacted)
	}
	if len(all) == 0 {
		return msg
	}
	slices.SortStableFunc(all, func(a, b secret) int { return len(b.s) - len(a.s) })
	pairs := make([]string, 0, 2*len(all))
	for _, s := range all {
		pairs = append(pairs, s.s, s.by)
	}
	return strings.NewReplacer(pairs...).Replace(msg)
}
