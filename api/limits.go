package api

import (
	"cmp"
	"time"
)

// Limits are the API's defences against a rider, a client or a crowd asking more than the
// service can give. Each holds per API process, in memory: with N processes behind a load
// balancer, a rider may get up to N times a limit. That is the trade for checking a limit
// without a database round trip, which is the point of most of them.
//
// A rider has four budgets, each named for what it limits, and a 429 names the one spent:
// bookings (new keys on POST /rides), cancels (new keys on POST /rides/{id}/cancel), requests
// (every POST, first tries, retries and replays alike) and reads (GET /rides, GET
// /rides/{id}). A replay or a retry of a stored key spends only the requests budget: its booking
// was counted once, when its key was made. A first try whose key was not stored (a conflict, a
// lost database) spent its token all the same: a token too many, never one too few.
//
// None counts failed authentications: a token the API did not issue is refused without a
// lookup (see authenticate), so a flood of them costs a hash each, and nobody need be refused
// for it, least of all the riders who share the flood's address.
type Limits struct {
	// Off turns every limit off, for load tests (RATE_LIMITS=off).
	Off bool

	// RiderRidesPerMinute and RiderRideBurst are one rider's budget of new bookings: a POST
	// /rides whose Idempotency-Key is new, counted as its key is made. Default 10 a minute with
	// a burst of 10: a rider books a handful of rides a minute at most.
	RiderRidesPerMinute int
	RiderRideBurst      int

	// RiderCancelsPerMinute and RiderCancelBurst are one rider's budget of new cancels, counted
	// as bookings are. Default 10 a minute with a burst of 10: a rider cancels no more rides than
	// they book, and each cancel is a refund at Stripe.
	RiderCancelsPerMinute int
	RiderCancelBurst      int

	// RiderRequestsPerMinute and RiderRequestBurst are one rider's budget of POST /rides and
	// POST /rides/{id}/cancel requests, new or not, checked before the request is read: what a
	// replay or a retry spends, and what bounds the database work of a flood of them. Default 60
	// a minute with a burst of 30: a retrying app sends a few attempts for each request, and a
	// replay costs one short transaction, about what a read costs.
	RiderRequestsPerMinute int
	RiderRequestBurst      int

	// RiderRidesInFlight caps one rider's POST /rides and POST /rides/{id}/cancel requests
	// being worked on at once, a part of the requests budget. Default 3: one request and its
	// impatient retries, which would find the key in use anyway.
	RiderRidesInFlight int

	// RiderReadsPerMinute, RiderReadBurst and RiderReadsInFlight are one rider's budget for
	// reading rides back (GET /rides/{id}, GET /rides), apart from the others, so that none
	// starves another. Default 120 a minute, a burst of 60, 5 at once: an app refreshing a
	// screen of rides reads a few dozen at a time, and never needs more than a handful in flight.
	RiderReadsPerMinute int
	RiderReadBurst      int
	RiderReadsInFlight  int

	// MaxRequestsInFlight caps the requests being worked on at once by this process, all
	// routes but the health checks; past it, requests are shed with 503 and Retry-After
	// rather than queued for a pool connection until their deadlines. Default 200: most
	// in-flight ride requests wait on Stripe (hundreds of milliseconds), not on the pool, so
	// the cap sits well above the pool's 16 connections, and well below what memory allows.
	MaxRequestsInFlight int
}

// Defaults of Limits.
const (
	RiderRidesPerMinuteDefault    = 10
	RiderRideBurstDefault         = 10
	RiderCancelsPerMinuteDefault  = 10
	RiderCancelBurstDefault       = 10
	RiderRequestsPerMinuteDefault = 60
	RiderRequestBurstDefault      = 30
	RiderRidesInFlightDefault     = 3
	RiderReadsPerMinuteDefault    = 120
	RiderReadBurstDefault         = 60
	RiderReadsInFlightDefault     = 5
	MaxRequestsInFlightDefault    = 200
)

// WithDefaults returns l with each zero field set to its default: the limits a Server of l
// enforces.
func (l Limits) WithDefaults() Limits {
	l.RiderRidesPerMinute = cmp.Or(l.RiderRidesPerMinute, RiderRidesPerMinuteDefault)
	l.RiderRideBurst = cmp.Or(l.RiderRideBurst, RiderRideBurstDefault)
	l.RiderCancelsPerMinute = cmp.Or(l.RiderCancelsPerMinute, RiderCancelsPerMinuteDefault)
	l.RiderCancelBurst = cmp.Or(l.RiderCancelBurst, RiderCancelBurstDefault)
	l.RiderRequestsPerMinute = cmp.Or(l.RiderRequestsPerMinute, RiderRequestsPerMinuteDefault)
	l.RiderRequestBurst = cmp.Or(l.RiderRequestBurst, RiderRequestBurstDefault)
	l.RiderRidesInFlight = cmp.Or(l.RiderRidesInFlight, RiderRidesInFlightDefault)
	l.RiderReadsPerMinute = cmp.Or(l.RiderReadsPerMinute, RiderReadsPerMinuteDefault)
	l.RiderReadBurst = cmp.Or(l.RiderReadBurst, RiderReadBurstDefault)
	l.RiderReadsInFlight = cmp.Or(l.RiderReadsInFlight, RiderReadsInFlightDefault)
	l.MaxRequestsInFlight = cmp.Or(l.MaxRequestsInFlight, MaxRequestsInFlightDefault)
	return l
}

// perMinute is n events a minute as a rate.
func perMinute(n int) float64 { return float64(n) / time.Minute.Seconds() }
