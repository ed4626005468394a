package api

import (
	"cmp"
	"time"
)

// Limits are the API's defences against a rider, a client or a crowd asking more than the
// service can give. Each holds per API process, in memory: with N processes behind a load
// balancer, a rider may get up to N times a limit. That is the trade for checking a limit
// without a database round trip, which is the point of most of them.
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

	// AuthFailuresPerMinute and AuthFailureBurst are a client address's token bucket for
	// failed authentication: once it is empty, the address's requests are refused before the
	// database is asked for their token. IPv6 addresses count by their /64, which one client
	// usually holds whole. Default 20 a minute, burst 20: an app whose token expired fails once
	// and asks its rider to sign in; a guesser fails all day.
	AuthFailuresPerMinute int
	AuthFailureBurst      int

	// LimitedAddressLookupsPerMinute is how many tokens a minute, all addresses together, are
	// still looked up for addresses past their failure budget, up to a second's worth at once. A valid token among them gets
	// through, so that a guesser does not lock out the riders who share its address (a mobile
	// carrier's NAT, an office); an invalid one counts as a failure as before. The budget is the
	// process's, so that however many addresses guess, they cost the database at most this many
	// lookups a minute, each one indexed and cheap. (A token carries 256 random bits: guessing
	// one is hopeless, and the limits protect the database, not the tokens.) Default 6,000 a
	// minute, 100 at once.
	LimitedAddressLookupsPerMinute int

	// MaxRequestsInFlight caps the requests being worked on at once by this process, all
	// routes but the health checks; past it, requests are shed with 503 and Retry-After
	// rather than queued for a pool connection until their deadlines. Default 200: most
	// in-flight ride requests wait on Stripe (hundreds of milliseconds), not on the pool, so
	// the cap sits well above the pool's 16 connections, and well below what memory allows.
	MaxRequestsInFlight int
}

// Defaults of Limits.
const (
	RiderRidesPerMinuteDefault            = 10
	RiderRideBurstDefault                 = 10
	RiderRidesInFlightDefault             = 3
	RiderReadsPerMinuteDefault            = 120
	RiderReadBurstDefault                 = 60
	RiderReadsInFlightDefault             = 5
	AuthFailuresPerMinuteDefault          = 20
	AuthFailureBurstDefault               = 20
	LimitedAddressLookupsPerMinuteDefault = 6000
	MaxRequestsInFlightDefault            = 200
)

func (l Limits) withDefaults() Limits {
	l.RiderRidesPerMinute = cmp.Or(l.RiderRidesPerMinute, RiderRidesPerMinuteDefault)
	l.RiderRideBurst = cmp.Or(l.RiderRideBurst, RiderRideBurstDefault)
	l.RiderRidesInFlight = cmp.Or(l.RiderRidesInFlight, RiderRidesInFlightDefault)
	l.RiderReadsPerMinute = cmp.Or(l.RiderReadsPerMinute, RiderReadsPerMinuteDefault)
	l.RiderReadBurst = cmp.Or(l.RiderReadBurst, RiderReadBurstDefault)
	l.RiderReadsInFlight = cmp.Or(l.RiderReadsInFlight, RiderReadsInFlightDefault)
	l.AuthFailuresPerMinute = cmp.Or(l.AuthFailuresPerMinute, AuthFailuresPerMinuteDefault)
	l.AuthFailureBurst = cmp.Or(l.AuthFailureBurst, AuthFailureBurstDefault)
	l.LimitedAddressLookupsPerMinute = cmp.Or(l.LimitedAddressLookupsPerMinute, LimitedAddressLookupsPerMinuteDefault)
	l.MaxRequestsInFlight = cmp.Or(l.MaxRequestsInFlight, MaxRequestsInFlightDefault)
	return l
}

// perMinute is n events a minute as a rate.
func perMinute(n int) float64 { return float64(n) / time.Minute.Seconds() }
