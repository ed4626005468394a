package api

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

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
	bucket := s.bucket(key, now)
	reservation := bucket.ReserveN(now, 1)
	if wait = reservation.DelayFrom(now); wait > 0 {
		reservation.CancelAt(now)
	}
	return wait
}

func (s *limiterSet[K]) bucket(key K, now time.Time) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastSweep) >= sweepEvery {
		for k, b := range s.buckets {
			if b.TokensAt(now) >= float64(s.burst) {
				delete(s.buckets, k)
			}
		}
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
