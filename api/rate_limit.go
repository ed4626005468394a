package api

import (
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

// limiter enforces Limits: a rider's four budgets (see Limits) and the process's cap. An answer
// over a limit stores nothing and is not logged one by one (logRequests summarizes 429s);
// rocketrides_rate_limited_total counts it by limit.
type limiter struct {
	limits   Limits
	bookings *riderBudget // new keys of POST /rides, spent as the key is made (admitNewKey)
	cancels  *riderBudget // new keys of POST /rides/{id}/cancel, likewise
	requests *riderBudget // every POST /rides and POST /rides/{id}/cancel, before it is read
	reads    *riderBudget // GET /rides, GET /rides/{id}

	inFlight atomic.Int64

	// now is time.Now; tests move it.
	now func() time.Time
}

// riderBudget is what each rider may ask of one kind of request: a rate, and for some a number
// worked on at once. A refusal carries the budget's own problem code, and a detail that names
// the budget and its number.
type riderBudget struct {
	code  problem.Code
	title string

	rate       *limiterSet[int64]
	perMinute  int
	rateLimit  string // the limit label of rocketrides_rate_limited_total
	rateDetail string // with %d for perMinute

	// maxInFlight is 0 for a budget that caps no number at once.
	maxInFlight    int
	inFlightLimit  string
	inFlightDetail string // with %d for maxInFlight

	mu       sync.Mutex
	inFlight map[int64]int
}

// The limit label values of rocketrides_rate_limited_total.
const (
	limitBookingRate      = "rider_booking_rate"
	limitCancelRate       = "rider_cancel_rate"
	limitRequestRate      = "rider_request_rate"
	limitRequestsInFlight = "rider_requests_in_flight"
	limitReadRate         = "rider_read_rate"
	limitReadsInFlight    = "rider_reads_in_flight"
	limitInFlight         = "in_flight"
)

// The ends of the budgets' details: what the rider does next.
const (
	retryWithTheSameKey    = " Retry after the time in Retry-After, with the same Idempotency-Key."
	retryAfterTheTimeGiven = " Retry after the time in Retry-After."
)

// retryAfterShed is the Retry-After of a shed request: load comes and goes in seconds.
const retryAfterShed = time.Second

func newLimiter(limits Limits) *limiter {
	limits = limits.WithDefaults()
	rate := func(perMinuteN, burst int) *limiterSet[int64] {
		return newLimiterSet[int64](perMinute(perMinuteN), burst)
	}
	return &limiter{
		limits: limits,
		bookings: &riderBudget{
			code: problem.CodeBookingRateLimited, title: "Booking budget spent",
			rate: rate(limits.RiderRidesPerMinute, limits.RiderRideBurst), perMinute: limits.RiderRidesPerMinute,
			rateLimit:  limitBookingRate,
			rateDetail: "The rider's booking budget is spent: a rider may book up to %d new rides a minute." + retryWithTheSameKey,
		},
		cancels: &riderBudget{
			code: problem.CodeCancelRateLimited, title: "Cancel budget spent",
			rate: rate(limits.RiderCancelsPerMinute, limits.RiderCancelBurst), perMinute: limits.RiderCancelsPerMinute,
			rateLimit:  limitCancelRate,
			rateDetail: "The rider's cancel budget is spent: a rider may cancel up to %d rides a minute." + retryWithTheSameKey,
		},
		requests: &riderBudget{
			code: problem.CodeRequestRateLimited, title: "Request budget spent",
			rate: rate(limits.RiderRequestsPerMinute, limits.RiderRequestBurst), perMinute: limits.RiderRequestsPerMinute,
			rateLimit:      limitRequestRate,
			rateDetail:     "The rider's request budget is spent: a rider may send up to %d bookings and cancels a minute, retries and replays included." + retryWithTheSameKey,
			maxInFlight:    limits.RiderRidesInFlight,
			inFlightLimit:  limitRequestsInFlight,
			inFlightDetail: "The rider's request budget is spent: a rider may have up to %d bookings and cancels in progress at once." + retryWithTheSameKey,
			inFlight:       make(map[int64]int),
		},
		reads: &riderBudget{
			code: problem.CodeReadRateLimited, title: "Read budget spent",
			rate: rate(limits.RiderReadsPerMinute, limits.RiderReadBurst), perMinute: limits.RiderReadsPerMinute,
			rateLimit:      limitReadRate,
			rateDetail:     "The rider's read budget is spent: a rider may read up to %d rides a minute." + retryAfterTheTimeGiven,
			maxInFlight:    limits.RiderReadsInFlight,
			inFlightLimit:  limitReadsInFlight,
			inFlightDetail: "The rider's read budget is spent: a rider may have up to %d reads in progress at once." + retryAfterTheTimeGiven,
			inFlight:       make(map[int64]int),
		},
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
			writeProblem(w, newError(http.StatusServiceUnavailable, problem.CodeServiceUnavailable, "Service unavailable",
				"The service is handling as many requests as it can. Retry after the time in Retry-After, with the same Idempotency-Key.").withRetryAfter(retryAfterShed))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitRider applies a rider's budget b, one with a cap at once: the rate of requests, and how
// many are worked on at once. It runs after authenticate. A refusal is counted in outcomes, the
// route's own counter of answers, when it has one.
func (s *Server) limitRider(b *riderBudget, outcomes *prometheus.CounterVec) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l := s.limiter
			if l.limits.Off {
				next.ServeHTTP(w, r)
				return
			}
			reject := func(e *apiError) {
				if outcomes != nil {
					outcomes.WithLabelValues(metrics.RideRateLimited).Inc()
				}
				writeProblem(w, e)
			}
			userID := userFrom(r.Context()).ID
			if e := s.spend(b, userID); e != nil {
				reject(e)
				return
			}

			b.mu.Lock()
			admitted := b.inFlight[userID] < b.maxInFlight
			if admitted {
				b.inFlight[userID]++
			}
			b.mu.Unlock()
			if !admitted {
				s.metrics.RateLimited.WithLabelValues(b.inFlightLimit).Inc()
				reject(errRateLimited(b, time.Second, fmt.Sprintf(b.inFlightDetail, b.maxInFlight)))
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

// admitNewKey is the phases' AdmitNewKey for a request of userID: it spends one of b's tokens
// the first time it is asked, and refuses the request with b's problem when b has none. A
// transaction retried after a serialization failure asks again; the request has paid already.
// Nil when the limits are off.
func (s *Server) admitNewKey(b *riderBudget, userID int64) func() error {
	if s.limiter.limits.Off {
		return nil
	}
	paid := false
	return func() error {
		if !paid {
			if e := s.spend(b, userID); e != nil {
				return &budgetSpentError{e}
			}
			paid = true
		}
		return nil
	}
}

// budgetSpentError carries a budget's refusal out of the phases, for errFromPhases to answer.
type budgetSpentError struct{ apiErr *apiError }

func (e *budgetSpentError) Error() string { return e.apiErr.problem.Detail }

// spend takes one of userID's tokens of b, and returns b's refusal, counted, when none is left.
func (s *Server) spend(b *riderBudget, userID int64) *apiError {
	wait := b.rate.take(userID, s.limiter.now())
	if wait <= 0 {
		return nil
	}
	s.metrics.RateLimited.WithLabelValues(b.rateLimit).Inc()
	return errRateLimited(b, wait, fmt.Sprintf(b.rateDetail, b.perMinute))
}

// errRateLimited is b's 429, to be retried after wait.
func errRateLimited(b *riderBudget, wait time.Duration, detail string) *apiError {
	return newError(http.StatusTooManyRequests, b.code, b.title, detail).withRetryAfter(wait) // writeProblem rounds it up to whole seconds
}

// sweepEvery is how often a limiterSet forgets its full buckets. A full bucket is the same as no
// bucket, so forgetting it changes nothing, and memory follows the keys seen lately.
const sweepEvery = time.Minute

// limiterSet is a token bucket per key (a rider, a client address), made on first use.
type limiterSet[K comparable] struct {
	limit rate.Limit
	burst int

	mu        sync.Mutex
	buckets   map[K]*rate.Limiter
	lastSweep time.Time
}

func newLimiterSet[K comparable](perSecond float64, burst int) *limiterSet[K] {
	return &limiterSet[K]{limit: rate.Limit(perSecond), burst: burst, buckets: make(map[K]*rate.Limiter)}
}

// take takes a token from key's bucket. If the bucket is empty it takes nothing and returns how
// long until a token is due.
func (s *limiterSet[K]) take(key K, now time.Time) (wait time.Duration) {
	reservation := s.bucket(key, now).ReserveN(now, 1)
	if wait = reservation.DelayFrom(now); wait > 0 {
		reservation.CancelAt(now)
	}
	return wait
}

func (s *limiterSet[K]) bucket(key K, now time.Time) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) >= sweepEvery {
		maps.DeleteFunc(s.buckets, func(_ K, b *rate.Limiter) bool { return b.TokensAt(now) >= float64(s.burst) })
		s.lastSweep = now
	}
	bucket, ok := s.buckets[key]
	if !ok {
		bucket = rate.NewLimiter(s.limit, s.burst)
		s.buckets[key] = bucket
	}
	return bucket
}

// size is how many buckets the set holds, for tests.
func (s *limiterSet[K]) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buckets)
}
