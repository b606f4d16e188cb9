package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/burnpoller/burnpoller/internal/redact"
)

// problem is what went wrong with a delivery to e, as it is recorded
// (webhook_deliveries.last_error), logged and shown (poller webhooks
// status): "POST <label>: <what>". The label is the only name of the
// endpoint in it: whatever of e's URL what may still hold (its host, a
// token in a subdomain, the path, the query, user info) is scrubbed, then
// what is cut to 200 bytes (after: a cut secret would not be found), and
// control characters become spaces, so that it stays one short line.
func (e Endpoint) problem(what string) string {
	what = e.scrub(what)
	if len(what) > problemCap {
		what = strings.ToValidUTF8(what[:problemCap], "")
	}
	what = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, what)
	return "POST " + e.Label + ": " + what
}

// problemCap is the most of a failure's text problem keeps.
const problemCap = 200

// scrub replaces in msg e's URL (as given, as parsed, as net/http quotes
// it) by e's label, and every part of it the label does not show by
// xxxxx: the host and its names, user info, path segments, query names and
// values, the fragment.
func (e Endpoint) scrub(msg string) string {
	u, err := url.Parse(e.URL)
	if err != nil {
		return msg
	}
	urls := []string{e.URL, u.String(), u.Redacted()}
	parts := []string{u.Host, u.Hostname(), strings.ToLower(u.Hostname()), u.Fragment, u.EscapedFragment()}
	parts = append(parts, redact.HiddenHostLabels(u.Host)...)
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			parts = append(parts, p, url.QueryEscape(p))
			// net/http's errors show the password as *** (its
			// stripPassword).
			urls = append(urls, strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1))
		}
		parts = append(parts, u.User.Username(), u.User.String())
	}
	for _, path := range []string{u.Path, u.EscapedPath()} {
		parts = append(parts, strings.Split(path, "/")...)
	}
	for p := range strings.SplitSeq(u.RawQuery, "&") {
		name, value, _ := strings.Cut(p, "=")
		parts = append(parts, p, name, value)
		for _, s := range []string{name, value} {
			if un, err := url.QueryUnescape(s); err == nil {
				parts = append(parts, un)
			}
		}
	}
	return redact.Scrub(msg, e.Label, urls, parts)
}

// describe says why a request got no answer, by the class of failure an
// operator acts on (DNS, connection, timeout, TLS, a proxy), in words that
// never hold the URL or the host: net/http's errors quote the URL, a
// resolver's the host name, a certificate check's the host the
// certificate is not valid for, and a webhook's token may be in any of
// them (https://<token>.m.pipedream.net). A failure of none of these
// classes keeps its text, which problem scrubs.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	class := failureClass(err)
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "proxyconnect" {
		return "proxy: " + class
	}
	return class
}

// failureClass is describe's class of err, unwrapped of the URL.
func failureClass(err error) string {
	if s, ok := dnsFailure(err); ok {
		return s
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout (WEBHOOK_TIMEOUT)"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	if s, ok := tlsFailure(err); ok {
		return s
	}
	if s, ok := connectionFailure(err); ok {
		return s
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "response headers exceeded"):
		return "answer headers over 64 KiB"
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "tls: the endpoint answered in plain HTTP"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		msg = oe.Op + ": " + oe.Err.Error()
	}
	return msg
}

// dnsFailure classes a failed lookup of the endpoint's name (a
// *net.DNSError names the host).
func dnsFailure(err error) (string, bool) {
	var de *net.DNSError
	if !errors.As(err, &de) {
		return "", false
	}
	switch {
	case de.IsNotFound:
		return "dns: no such host", true
	case de.IsTimeout:
		return "dns: lookup timed out", true
	case de.IsTemporary:
		return "dns: temporary failure of the lookup", true
	}
	return "dns: lookup failed", true
}

// tlsFailure classes a failed TLS handshake: x509.HostnameError names the
// endpoint's host.
func tlsFailure(err error) (string, bool) {
	var (
		host    x509.HostnameError
		unknown x509.UnknownAuthorityError
		invalid x509.CertificateInvalidError
		record  tls.RecordHeaderError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &host):
		return "tls: the certificate is not valid for the endpoint's host", true
	case errors.As(err, &unknown):
		return "tls: the certificate is signed by an unknown authority", true
	case errors.As(err, &invalid):
		return "tls: the certificate is invalid (" + certReason(invalid.Reason) + ")", true
	case errors.As(err, &record):
		return "tls: the endpoint does not speak TLS", true
	case errors.As(err, &verify):
		return "tls: the certificate does not verify", true
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" {
		// An alert from the endpoint: its text is TLS's own
		// ("tls: handshake failure").
		return "tls: the endpoint refused the handshake: " + oe.Err.Error(), true
	}
	return "", false
}

// certReason names why x509 found a certificate invalid.
func certReason(r x509.InvalidReason) string {
	switch r {
	case x509.Expired:
		return "expired or not yet valid"
	case x509.NotAuthorizedToSign:
		return "signed by a certificate that is not a CA"
	case x509.IncompatibleUsage:
		return "not for server authentication"
	default:
		return "reason " + strconv.Itoa(int(r))
	}
}

// connectionFailure classes a connection refused, reset, closed or
// unreachable (a *net.OpError names only addresses, but its class is what
// matters).
func connectionFailure(err error) (string, bool) {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect: connection refused", true
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the endpoint", true
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "connect: no route to host", true
	case errors.Is(err, syscall.ENETUNREACH):
		return "connect: network is unreachable", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the endpoint closed the connection without an answer", true
	}
	return "", false
}
