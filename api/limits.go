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
// None counts failed authentications: a token the API did not issue is refused without a
// lookup (see authenticate), so a flood of them costs a hash each, and nobody need be refused
// for it, least of all the riders who share the flood's address.
type Limits struct {
	// Off turns every limit off, for load tests (RATE_LIMITS=off).
	Off bool

	// RiderRidesPerMinute and RiderRideBurst are one rider's token bucket on POST /rides: a
	// burst of RiderRideBurst requests at once, refilled at RiderRidesPerMinute. Replays and
	// retries count: each is a request the service works on. Default 10 a minute with a
	// burst of 10: a rider books a handful of rides a minute at most, and a retrying app sends
	// a few attempts for one ride.
	RiderRidesPerMinute int
	RiderRideBurst      int

	// RiderRidesInFlight caps one rider's POST /rides being worked on at once. Default 3: one
	// ride and its impatient retries, which would find the key in use anyway.
	RiderRidesInFlight int

	// RiderReadsPerMinute, RiderReadBurst and RiderReadsInFlight are one rider's budget for
	// reading rides back (GET /rides/{id}), apart from booking's, so that neither starves the
	// other. Default 120 a minute, a burst of 60, 5 at once: an app refreshing a screen of rides
	// reads a few dozen at a time, and never needs more than a handful in flight.
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
	RiderRidesPerMinuteDefault = 10
	RiderRideBurstDefault      = 10
	RiderRidesInFlightDefault  = 3
	RiderReadsPerMinuteDefault = 120
	RiderReadBurstDefault      = 60
	RiderReadsInFlightDefault  = 5
	MaxRequestsInFlightDefault = 200
)

func (l Limits) withDefaults() Limits {
	l.RiderRidesPerMinute = cmp.Or(l.RiderRidesPerMinute, RiderRidesPerMinuteDefault)
	l.RiderRideBurst = cmp.Or(l.RiderRideBurst, RiderRideBurstDefault)
	l.RiderRidesInFlight = cmp.Or(l.RiderRidesInFlight, RiderRidesInFlightDefault)
	l.RiderReadsPerMinute = cmp.Or(l.RiderReadsPerMinute, RiderReadsPerMinuteDefault)
	l.RiderReadBurst = cmp.Or(l.RiderReadBurst, RiderReadBurstDefault)
	l.RiderReadsInFlight = cmp.Or(l.RiderReadsInFlight, RiderReadsInFlightDefault)
	l.MaxRequestsInFlight = cmp.Or(l.MaxRequestsInFlight, MaxRequestsInFlightDefault)
	return l
}

// perMinute is n events a minute as a rate.
func perMinute(n int) float64 { return float64(n) / time.Minute.Seconds() }
