package stripeclient

import (
	"context"
	"net"
	"net/http"
	"time"
)

// MaxIdleConnsPerHostDefault is how many connections to Stripe are kept open between calls when
// Config.MaxIdleConnsPerHost does not say: as many as the API works on requests at once by
// default (api.MaxRequestsInFlightDefault), since each may be charging; a charge is made outside
// any transaction, so the database pool does not bound them. Go's default transport keeps 2,
// and every call beyond the second in flight then opens a connection of its own: a TCP and TLS
// handshake on a rider's time.
const MaxIdleConnsPerHostDefault = 200

// Bounds on opening a connection to Stripe. Each step takes tens of milliseconds; these allow
// for a lost packet resent (after 1 s, then 3 s), and past them the rider is answered 503, to
// retry, rather than held for the rest of the call's Timeout.
const (
	DialTimeout         = 5 * time.Second
	TLSHandshakeTimeout = 5 * time.Second
)

// IdleConnTimeout closes a connection that no call used for this long, as Go's default
// transport does: a quiet process need not hold hundreds of connections to Stripe.
const IdleConnTimeout = 90 * time.Second

// newTransport returns the transport of a client without Config.Transport: Go's default
// transport's settings, keeping up to maxIdleConnsPerHost connections, and calling dialled after
// each new connection (dialled nil: nothing).
func newTransport(maxIdleConnsPerHost int, dialled func()) *http.Transport {
	dialer := &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second} // TCP keep-alive probes as Go's default
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err == nil && dialled != nil {
			dialled()
		}
		return conn, err
	}
	// Stripe is one host, so the cap on all idle connections is the cap on its own.
	t.MaxIdleConns = maxIdleConnsPerHost
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.TLSHandshakeTimeout = TLSHandshakeTimeout
	t.IdleConnTimeout = IdleConnTimeout
	return t
}
