package api

import (
	"log/slog"
	"testing"
	"time"
)

// A new key's transaction that a serialization failure made retry asks AdmitNewKey again: the
// request spends one booking token, whatever the tries.
func TestAdmitNewKeySpendsOnce(t *testing.T) {
	t.Parallel()
	s := NewServer(nil, nil, slog.New(slog.DiscardHandler), Config{Limits: Limits{RiderRideBurst: 2, RiderRidesPerMinute: 1}})
	now := time.Now()
	s.limiter.now = func() time.Time { return now } // no token comes back meanwhile

	first := s.admitNewKey(s.limiter.bookings, 1)
	for try := range 3 {
		if err := first(); err != nil {
			t.Fatalf("try %d of one request: want it admitted, got %v", try+1, err)
		}
	}
	if err := s.admitNewKey(s.limiter.bookings, 1)(); err != nil {
		t.Fatalf("want a second request admitted with the burst's second token, got %v", err)
	}
	if err := s.admitNewKey(s.limiter.bookings, 1)(); err == nil {
		t.Fatal("want a third request refused: the burst of 2 is spent")
	}
}

func TestLimiterSet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	set := newLimiterSet[string](perMinute(6), 2) // a token every 10 s, two at once

	for i := range 2 {
		if wait := set.take("a", now); wait != 0 {
			t.Fatalf("take %d within the burst: want no wait, got %s", i, wait)
		}
	}
	if wait := set.take("a", now); wait != 10*time.Second {
		t.Fatalf("past the burst: want a 10 s wait, got %s", wait)
	}
	if wait := set.take("b", now); wait != 0 {
		t.Fatalf("another key has its own bucket: want no wait, got %s", wait)
	}
	if wait := set.take("a", now.Add(10*time.Second)); wait != 0 {
		t.Fatalf("a refill later: want no wait, got %s", wait)
	}

	// Once full again, buckets are forgotten at the next sweep; a bucket still draining is kept.
	later := now.Add(sweepEvery + 20*time.Second)
	set.take("c", later)
	if n := set.size(); n != 1 {
		t.Fatalf("want only c's bucket left after the sweep, got %d", n)
	}
}

// TestLimiterSetSweepKeepsDrainingBuckets requires a sweep to keep every bucket that is not full:
// forgetting one gives its key a full bucket again, more than its budget.
func TestLimiterSetSweepKeepsDrainingBuckets(t *testing.T) {
	t.Parallel()
	const burst = 4
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	set := newLimiterSet[int](perMinute(1), burst) // a token a minute, four at once

	// Key i spends burst-i tokens now, the first take sweeping an empty set.
	for i := range burst {
		for range burst - i {
			if wait := set.take(i, now); wait != 0 {
				t.Fatalf("key %d: want the burst, got a wait of %s", i, wait)
			}
		}
	}
	// A sweep a little over a minute later, when each bucket has a token more, key 0's a
	// quarter full and key 2's three quarters.
	later := now.Add(sweepEvery + time.Second)
	set.take(-1, later)
	for i := range burst {
		want := min(burst, i+1)
		got := 0
		for set.take(i, later) == 0 {
			got++
		}
		if got != want {
			t.Fatalf("key %d after the sweep: want %d tokens left, got %d", i, want, got)
		}
	}
}
