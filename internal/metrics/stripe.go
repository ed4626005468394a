package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stripe call results, the values of rocketrides_stripe_requests_total's result label, from the
// HTTP exchange alone.
const (
	StripeSucceeded   = "succeeded"     // 2xx
	StripeDeclined    = "card_declined" // 402: a card error, the rider's card_declined
	StripeRateLimited = "rate_limited"  // 429
	StripeRejected    = "rejected"      // any other 4xx: a request Stripe refused
	StripeServerError = "server_error"  // 5xx
	StripeUnreachable = "unreachable"   // no answer: connection refused or reset, or a timeout
)

var stripeResults = []string{StripeSucceeded, StripeDeclined, StripeRateLimited, StripeRejected, StripeServerError, StripeUnreachable}

// Stripe is the series of calls to Stripe, recorded by the client's transport (Transport), so
// that every call counts, whichever code makes it.
type Stripe struct {
	Requests        *prometheus.CounterVec
	RequestDuration prometheus.Histogram

	// ConnectionsOpened counts the connections to Stripe the client's transport dialled. Each is
	// a TCP and TLS handshake on a rider's time, so it should stay near the number of calls in
	// flight at once, not grow with the calls made.
	ConnectionsOpened prometheus.Counter
}

// NewStripe returns the Stripe series, registered with reg (nil: unregistered).
func NewStripe(reg prometheus.Registerer) *Stripe {
	m := &Stripe{
		Requests: newCounterByLabel("stripe_requests_total", "Calls to the Stripe API, by result.",
			"result", stripeResults...),
		RequestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "stripe_request_duration_seconds",
			Help:    "Time until Stripe answered a call, or until the call failed.",
			Buckets: latencyBuckets,
		}),
		ConnectionsOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "stripe_connections_opened_total",
			Help: "Connections to the Stripe API opened (dialled) by the client.",
		}),
	}
	register(reg, m.Requests, m.RequestDuration, m.ConnectionsOpened)
	return m
}

// Transport returns next (http.DefaultTransport if nil) recording each call in m.
func (m *Stripe) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		res, err := next.RoundTrip(req)
		m.RequestDuration.Observe(time.Since(start).Seconds())
		m.Requests.WithLabelValues(stripeResult(res, err)).Inc()
		return res, err
	})
}

func stripeResult(res *http.Response, err error) string {
	switch {
	case err != nil:
		return StripeUnreachable
	case res.StatusCode < 300:
		return StripeSucceeded
	case res.StatusCode == http.StatusPaymentRequired:
		return StripeDeclined
	case res.StatusCode == http.StatusTooManyRequests:
		return StripeRateLimited
	case res.StatusCode < 500:
		return StripeRejected
	default:
		return StripeServerError
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
