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
