package webhooks

import "net/http"

// SetTransport replaces the dispatcher's HTTP transport (a test's frozen
// replica: a transport that never returns).
func (d *Dispatcher) SetTransport(rt http.RoundTripper) { d.client.Transport = rt }
