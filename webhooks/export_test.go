package webhooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
)

// SetTransport replaces the dispatcher's HTTP transport (a test's frozen
// replica: a transport that never returns).
func (d *Dispatcher) SetTransport(rt http.RoundTripper) { d.client.Transport = rt }

// LegacyLabel is e's label from before token-like host labels were
// hidden, "" when it is e's label still.
func LegacyLabel(e Endpoint) string { return e.legacy }

// DialAllTo makes d connect to addr whatever host a URL names: a test's
// receiver stands in for a host name no resolver knows.
func DialAllTo(d *Dispatcher, addr string) {
	d.client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return new(net.Dialer).DialContext(ctx, network, addr)
	}
}

// TrustRoots makes d verify receivers' certificates against roots (a
// test's TLS receiver) rather than the system's.
func TrustRoots(d *Dispatcher, roots *x509.CertPool) {
	t := d.client.Transport.(*http.Transport)
	t.TLSClientConfig = t.TLSClientConfig.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	t.TLSClientConfig.RootCAs = roots
}
