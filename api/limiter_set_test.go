package api

import (
	"testing"
	"time"
)

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
	if wait := set.emptyFor("a", now.Add(4*time.Second)); wait != 6*time.Second {
		t.Fatalf("want 6 s left, got %s", wait)
	}
	if wait := set.take("b", now); wait != 0 {
		t.Fatalf("another key has its own bucket: want no wait, got %s", wait)
	}
	if wait := set.emptyFor("never-seen", now); wait != 0 {
		t.Fatalf("a key never seen may go: got %s", wait)
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
