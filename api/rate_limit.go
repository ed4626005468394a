package api

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// limiter enforces Limits. An answer over a limit stores nothing and is not logged one by one
// (logRequests summarizes 429s); rocketrides_rate_limited_total counts it by limit.
type limiter struct {
	limits Limits
	rides  *riderBudget // POST /rides
	reads  *riderBudget // GET /rides/{id}

	inFlight atomic.Int64

	// now is time.Now; tests move it.
	now func() time.Time
}

// riderBudget is what each rider may ask of one kind of route: a rate of requests, and a number
// worked on at once.
type riderBudget struct {
	rate        *limiterSet[int64]
	perMinute   int
	maxInFlight int

	// rateLimit and inFlightLimit are the limit labels of rocketrides_rate_limited_total;
	// rateDetail and inFlightDetail the problems' details, each with the number in it.
	rateLimit, inFlightLimit   string
	rateDetail, inFlightDetail string

	// rides: the budget of POST /rides, whose refusals also count as ride requests.
	rides bool

	mu       sync.Mutex
	inFlight map[int64]int
}

// newRiderBudget is perMinute requests a minute, burst at once and maxInFlight in progress, for
// each rider; over the rate it is refused under rateLimit with rateDetail, over the number in
// progress under inFlightLimit with inFlightDetail, each detail given its number.
func newRiderBudget(perMinuteN, burst, maxInFlight int, rateLimit, rateDetail, inFlightLimit, inFlightDetail string, rides bool) *riderBudget {
	return &riderBudget{
		rate:        newLimiterSet[int64](perMinute(perMinuteN), burst),
		perMinute:   perMinuteN,
		maxInFlight: maxInFlight,
		rateLimit:   rateLimit, rateDetail: rateDetail,
		inFlightLimit: inFlightLimit, inFlightDetail: inFlightDetail,
		rides:    rides,
		inFlight: make(map[int64]int),
	}
}

// The limit label values of rocketrides_rate_limited_total.
const (
	limitRiderRate     = "rider_rate"
	limitRiderInFlight = "rider_in_flight"
	limitReadRate      = "rider_read_rate"
	limitReadInFlight  = "rider_reads_in_flight"
	limitInFlight      = "in_flight"
)

// retryAfterShed is the Retry-After of a shed request: load comes and goes in seconds.
const retryAfterShed = time.Second

func newLimiter(limits Limits) *limiter {
	limits = limits.withDefaults()
	return &limiter{
		limits: limits,
		rides: newRiderBudget(limits.RiderRidesPerMinute, limits.RiderRideBurst, limits.RiderRidesInFlight,
			limitRiderRate, "A rider may book up to %d rides a minute. Retry after the time in Retry-After, with the same Idempotency-Key.",
			limitRiderInFlight, "A rider may have up to %d ride requests in progress at once. Retry after the time in Retry-After, with the same Idempotency-Key.",
			true),
		reads: newRiderBudget(limits.RiderReadsPerMinute, limits.RiderReadBurst, limits.RiderReadsInFlight,
			limitReadRate, "A rider may read up to %d rides a minute. Retry after the time in Retry-After.",
			limitReadInFlight, "A rider may have up to %d reads in progress at once. Retry after the time in Retry-After.",
			false),
		now: time.Now,
	}
}

// shedLoad answers 503 with Retry-After, at once, when MaxRequestsInFlight requests are being
// worked on already: better than queueing for a pool connection until a deadline. It runs after
// the rider's own limits (and, for a booking, after its body was read), so that one rider holds
// at most a rider's share of the process's slots, and a slow client holds none while it sends.
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

// limitRider applies a rider's budget b: the rate of requests, and how many are worked on at
// once. It runs after authenticate.
func (s *Server) limitRider(b *riderBudget) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l := s.limiter
			if l.limits.Off {
				next.ServeHTTP(w, r)
				return
			}
			userID := userFrom(r.Context()).ID
			if wait := b.rate.take(userID, l.now()); wait > 0 {
				s.rejectRider(w, b, b.rateLimit, wait, fmt.Sprintf(b.rateDetail, b.perMinute))
				return
			}

			b.mu.Lock()
			admitted := b.inFlight[userID] < b.maxInFlight
			if admitted {
				b.inFlight[userID]++
			}
			b.mu.Unlock()
			if !admitted {
				s.rejectRider(w, b, b.inFlightLimit, time.Second, fmt.Sprintf(b.inFlightDetail, b.maxInFlight))
				return
			}
			defer func() {
				b.mu.Lock()
				if b.inFlight[userID]--; b.inFlight[userID] == 0 {
					delete(b.inFlight, userID)
				}
				b.mu.Unlock()
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// rejectRider answers a request over one of the rider's limits.
func (s *Server) rejectRider(w http.ResponseWriter, b *riderBudget, limit string, wait time.Duration, detail string) {
	s.metrics.RateLimited.WithLabelValues(limit).Inc()
	if b.rides {
		s.metrics.RideRequests.WithLabelValues(metrics.RideRateLimited).Inc()
	}
	writeProblem(w, errRateLimited(wait, detail))
}

func errRateLimited(wait time.Duration, detail string) *apiError {
	e := newError(http.StatusTooManyRequests, problem.CodeRateLimited, "Rate limited", detail)
	e.retryAfter = wait // writeProblem rounds it up to whole seconds
	return e
}
