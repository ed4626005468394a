package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rocketrides/rocketrides/internal/connguard"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// Ride request outcomes, the values of rocketrides_ride_requests_total's outcome label: how each
// POST /rides ended, as the rider saw it. Those of the charge are the problem codes the rider got
// (and phases.StripeOutcome's values), so that a log line, a series and an answer name a charge's
// outcome alike.
const (
	RideCreated            = "created"                                       // 201: booked and charged, now
	RideReplayed           = "replayed"                                      // an earlier call's stored answer, sent again
	RideCardDeclined       = string(problem.CodeCardDeclined)                // 402: the card was declined
	RidePaymentRejected    = string(problem.CodePaymentRejected)             // 402: Stripe refused the charge for good
	RideKeyInUse           = "key_in_use"                                    // 409: another request holds the key
	RideKeyReused          = "key_reused"                                    // 422: the key came with other parameters
	RideConflict           = "conflict"                                      // 409: serialization retries ran out
	RidePaymentUnavailable = string(problem.CodePaymentProcessorUnavailable) // 503: Stripe could not be reached; retry
	RideNeedsReview        = string(problem.CodePaymentNeedsReview)          // 500, stored: a person must look at the charge
	RideRateLimited        = "rate_limited"                                  // 429: too many requests from the rider
	RideInvalid            = "invalid"                                       // 4xx: the request itself was wrong; nothing stored
	RideError              = "error"                                         // any other failure of ours (5xx)
)

// rideOutcomes lists every outcome, each of whose series exists at 0 from the start.
var rideOutcomes = []string{
	RideCreated, RideReplayed, RideCardDeclined, RidePaymentRejected, RideKeyInUse, RideKeyReused, RideConflict,
	RidePaymentUnavailable, RideNeedsReview, RideRateLimited, RideInvalid, RideError,
}

// Cancel outcomes, the values of rocketrides_cancel_requests_total's outcome label. Those of a
// ride that cannot be cancelled are the problem codes the rider got; the rest are the ride
// request's outcomes.
const (
	CancelCancelled       = "cancelled"                              // 200: refunded, now
	CancelAlreadyCanceled = string(problem.CodeRideAlreadyCancelled) // 409, stored
	CancelAlreadyRefunded = string(problem.CodeRideAlreadyRefunded)  // 409, stored
	CancelDisputed        = string(problem.CodeRideDisputed)         // 409, stored
	CancelNotCharged      = string(problem.CodeRideNotCharged)       // 409, stored
	CancelNotFound        = string(problem.CodeNotFound)             // 404, stored
)

// cancelOutcomes lists every outcome of a cancel.
var cancelOutcomes = []string{
	CancelCancelled, RideReplayed, CancelAlreadyCanceled, CancelAlreadyRefunded, CancelDisputed,
	CancelNotCharged, CancelNotFound, RideKeyInUse, RideKeyReused, RideConflict, RidePaymentUnavailable,
	RideNeedsReview, RideRateLimited, RideInvalid, RideError,
}

// Webhook results, the values of rocketrides_stripe_events_total's result label.
const (
	WebhookApplied          = "applied"           // a new event, applied
	WebhookKept             = "kept"              // a new event for a charge no ride records yet, kept for it
	WebhookDuplicate        = "duplicate"         // an event applied before: nothing changed
	WebhookIgnored          = "ignored"           // a type we do not act on
	WebhookSignatureInvalid = "signature_invalid" // refused: not signed by Stripe with our secret
	WebhookInvalid          = "invalid"           // refused: signed, but cannot be applied as sent
	WebhookError            = "error"             // not applied for a failure of ours; Stripe retries
)

// WebhookTypeOther is the type label of every event type we do not act on, so that Stripe's
// hundreds of types make one series.
const WebhookTypeOther = "other"

// API is the API process's own series.
type API struct {
	// HTTPRequests counts answered requests by route pattern (e.g. /rides/{id}, so that ids do
	// not explode the series) and status code.
	HTTPRequests *prometheus.CounterVec

	// HTTPRequestDuration is how long answers took, by route pattern.
	HTTPRequestDuration *prometheus.HistogramVec

	// RideRequests counts POST /rides by outcome (RideCreated, ...).
	RideRequests *prometheus.CounterVec

	// CancelRequests counts POST /rides/{id}/cancel by outcome (CancelCancelled, ...).
	CancelRequests *prometheus.CounterVec

	// StripeEvents counts the events POST /webhooks/stripe received, by type (one we act on, or
	// WebhookTypeOther) and result (WebhookApplied, ...).
	StripeEvents *prometheus.CounterVec

	// RateLimited counts requests refused by one of the API's limits, by limit:
	// rider_booking_rate, rider_cancel_rate, rider_request_rate, rider_requests_in_flight,
	// rider_read_rate, rider_reads_in_flight, in_flight (shed).
	RateLimited *prometheus.CounterVec

	// ConnectionsShed counts connections closed to make room at a connection cap, by reason
	// (connguard.ShedOldestAtCap, ...).
	ConnectionsShed *prometheus.CounterVec
}

// connectionShedReasons are the values of rocketrides_http_connections_shed_total's reason
// label, each of whose series exists at 0 from the start.
var connectionShedReasons = []string{connguard.ShedOldestAtCap, connguard.ShedOldestOfAddress, connguard.ShedRefused}

// NewAPI returns the API's series, registered with reg (nil: unregistered).
func NewAPI(reg prometheus.Registerer) *API {
	m := &API{
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern and status code.",
		}, []string{"route", "code"}),
		HTTPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		RideRequests: newCounterByLabel("ride_requests_total", "Ride requests (POST /rides), by outcome.",
			"outcome", rideOutcomes...),
		CancelRequests: newCounterByLabel("cancel_requests_total", "Cancels (POST /rides/{id}/cancel), by outcome.",
			"outcome", cancelOutcomes...),
		StripeEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "stripe_events_total",
			Help: "Stripe events received at POST /webhooks/stripe, by type and result.",
		}, []string{"type", "result"}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rate_limited_total",
			Help: "Requests refused by one of the API's limits, by limit.",
		}, []string{"limit"}),
	}
	m.ConnectionsShed = newCounterByLabel("http_connections_shed_total",
		"Connections closed to make room at a connection cap, by reason.", "reason", connectionShedReasons...)
	register(reg, m.HTTPRequests, m.HTTPRequestDuration, m.RideRequests, m.CancelRequests, m.StripeEvents,
		m.RateLimited, m.ConnectionsShed)
	return m
}

// ShedConnection counts a connection closed to make room, for connguard.Limits.Shed.
func (m *API) ShedConnection(reason string) { m.ConnectionsShed.WithLabelValues(reason).Inc() }

// RegisterOpenConnections registers rocketrides_http_connections, the API's open connections,
// read from open at each scrape.
func RegisterOpenConnections(reg prometheus.Registerer, open func() int) {
	register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "http_connections",
		Help: "Connections the API holds open.",
	}, func() float64 { return float64(open()) }))
}
