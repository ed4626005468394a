package main

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// abandon leaves a ride request of rider unlocked at ride_created after a Stripe 500, aged past
// the completer's default thresholds, and returns its key.
func abandon(t *testing.T, b *ridetest.Bundle, rider *ridetest.Rider, key string) *models.IdempotencyKey {
	t.Helper()
	ctx := context.Background()
	executor := phases.New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), phases.Config{})
	b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
	_, err := executor.CreateRide(ctx, &phases.CreateRideRequest{
		User:           rider.User,
		IdempotencyKey: key,
		Params:         phases.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4},
		OriginIP:       netip.MustParseAddr("203.0.113.7"),
	})
	if err == nil {
		t.Fatal("want the request to fail")
	}
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '10 minutes',
		last_run_at = now() - interval '2 minutes' WHERE idempotency_key = $1`, key)
	k, err := models.IdempotencyKeyGetForUpdate(ctx, b.Pool, rider.ID, key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func recoveryPoint(t *testing.T, b *ridetest.Bundle, key *models.IdempotencyKey) models.RecoveryPoint {
	t.Helper()
	k, err := models.IdempotencyKeyGetByIDForUpdate(context.Background(), b.Pool, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	return k.RecoveryPoint
}

func env(b *ridetest.Bundle, extra ...string) []string {
	return append([]string{
		"DATABASE_URL=" + b.Pool.Config().ConnString(),
		"STRIPE_API_KEY=" + ridetest.StripeAPIKey,
		"STRIPE_API_URL=" + b.Stripe.URL,
	}, extra...)
}
