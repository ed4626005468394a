package api

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// limiter enforces Limits. An answer over a limit stores nothing and is not logged one by one
// (logRequests summarizes 429s); rocketrides_rate_limited_total counts it by limit.
type limiter struct {
	limits       Limits
	riderRides   *limiterSet[int64]
	authFailures *limiterSet[netip.Prefix]

	mu            sync.Mutex
	riderInFlight map[int64]int

	inFlight atomic.Int64

	// now is time.Now; tests move it.
	now func() time.Time
}

// The limit label values of rocketrides_rate_limited_total.
const (
	limitRiderRate     = "rider_rate"
	limitRiderInFlight = "rider_in_flight"
	limitAuthFailures  = "auth_failures"
	limitInFlight      = "in_flight"
)

// retryAfterShed is the Retry-After of a shed request: load comes and goes in seconds.
const retryAfterShed = time.Second

func newLimiter(limits Limits) *limiter {
	limits = limits.withDefaults()
	return &limiter{
		limits:        limits,
		riderRides:    newLimiterSet[int64](perMinute(limits.RiderRidesPerMinute), limits.RiderRideBurst),
		authFailures:  newLimiterSet[netip.Prefix](perMinute(limits.AuthFailuresPerMinute), limits.AuthFailureBurst),
		riderInFlight: make(map[int64]int),
		now:           time.Now,
	}
}

// shedLoad answers 503 with Retry-After, at once, when MaxRequestsInFlight requests are being
// worked on already: better than queueing for a pool connection until a deadline.
func (s *Server) shedLoad(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.limiter
		if l.limits.Off {
			next.ServeHTTP(w, r)
			return
		}
		defer l.inFlight.Add(-1)
		if l.inFlight.Add(1) > int64(l.limits.MaxRequestsInFlight) {
			s.metrics.RateLimited.WithLabelValues(limitInFlight).Inc()
			e := newError(http.StatusServiceUnavailable, problem.CodeServiceUnavailable, "Service unavailable",
				"The service is handling as many requests as it can. Retry after the time in Retry-After, with the same Idempotency-Key.")
			e.retryAfter = retryAfterShed
			writeProblem(w, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitRider applies a rider's limits on POST /rides: the rate of requests, and how many are
// worked on at once. It runs after authenticate.
func (s *Server) limitRider(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.limiter
		if l.limits.Off {
			next.ServeHTTP(w, r)
			return
		}
		userID := userFrom(r.Context()).ID
		if wait := l.riderRides.take(userID, l.now()); wait > 0 {
			s.rejectRide(w, limitRiderRate, wait, fmt.Sprintf(
				"A rider may book up to %d rides a minute. Retry after the time in Retry-After, with the same Idempotency-Key.",
				l.limits.RiderRidesPerMinute))
			return
		}

		l.mu.Lock()
		admitted := l.riderInFlight[userID] < l.limits.RiderRidesInFlight
		if admitted {
			l.riderInFlight[userID]++
		}
		l.mu.Unlock()
		if !admitted {
			s.rejectRide(w, limitRiderInFlight, time.Second, fmt.Sprintf(
				"A rider may have up to %d ride requests in progress at once. Retry after the time in Retry-After, with the same Idempotency-Key.",
				l.limits.RiderRidesInFlight))
			return
		}
		defer func() {
			l.mu.Lock()
			if l.riderInFlight[userID]--; l.riderInFlight[userID] == 0 {
				delete(l.riderInFlight, userID)
			}
			l.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// rejectRide answers a ride request over one of the rider's limits.
func (s *Server) rejectRide(w http.ResponseWriter, limit string, wait time.Duration, detail string) {
	s.metrics.RateLimited.WithLabelValues(limit).Inc()
	s.metrics.RideRequests.WithLabelValues(metrics.RideRateLimited).Inc()
	writeProblem(w, errRateLimited(wait, detail))
}

// authFailureWait returns how long r's client address must wait before its token is checked
// again, after too many failed authentications; 0 if it may try now.
func (s *Server) authFailureWait(r *http.Request) time.Duration {
	if s.limiter.limits.Off {
		return 0
	}
	return s.limiter.authFailures.emptyFor(clientPrefix(r), s.limiter.now())
}

// authFailed counts a failed authentication against r's client address.
func (s *Server) authFailed(r *http.Request) {
	if !s.limiter.limits.Off {
		s.limiter.authFailures.take(clientPrefix(r), s.limiter.now())
	}
}

// clientPrefix is the client address that authentication failures count against: the TCP peer
// (see remoteIP), an IPv6 peer by its /64.
func clientPrefix(r *http.Request) netip.Prefix {
	addr := remoteIP(r)
	bits := 32
	if addr.Is6() {
		bits = 64
	}
	prefix, _ := addr.Prefix(bits)
	return prefix
}

func errRateLimited(wait time.Duration, detail string) *apiError {
	e := newError(http.StatusTooManyRequests, problem.CodeRateLimited, "Rate limited", detail)
	e.retryAfter = wait // writeProblem rounds it up to whole seconds
	return e
}
