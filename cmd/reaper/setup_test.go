package main

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

// oldKeys makes two ride requests 73 hours old: one finished, one left at ride_created by a
// Stripe 500.
func oldKeys(t *testing.T, b *ridetest.Bundle) {
	t.Helper()
	executor := phases.New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), phases.Config{})
	for i, key := range []string{"cmd-reaper-key-finished", "cmd-reaper-key-unfinished"} {
		if i == 1 {
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		}
		_, err := executor.CreateRide(context.Background(), &phases.CreateRideRequest{
			User:           b.Rider.User,
			IdempotencyKey: key,
			Params:         phases.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4},
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		})
		if (err != nil) != (i == 1) {
			t.Fatalf("unexpected outcome for %s: %v", key, err)
		}
	}
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '73 hours'`)
}
