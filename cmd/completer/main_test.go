package main

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

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

func TestOncePrintsCounts(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	b := ridetest.Setup(t)
	failing := abandon(t, b, b.Rider, "cmd-completer-key-failing")
	finishing := abandon(t, b, b.NewRider(t, "tok_visa"), "cmd-completer-key-finishing")
	// The least recently run key goes first, and meets Stripe's next 500.
	b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '3 minutes' WHERE id = $1`, failing.ID)
	b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)

	out, errOut, code := proctest.Run(t, bin, env(b), "-once")
	if code != 0 {
		t.Fatalf("want exit 0, got %d: %s", code, errOut)
	}
	if out != `{"succeeded":1,"failed":1}`+"\n" {
		t.Fatalf("want exactly one JSON line of counts, got %q (stderr %s)", out, errOut)
	}
	if p := recoveryPoint(t, b, finishing); p != models.RecoveryPointFinished {
		t.Fatalf("want the key finished, got %s", p)
	}
	if p := recoveryPoint(t, b, failing); p != models.RecoveryPointRideCreated {
		t.Fatalf("want the failing key left at ride_created, got %s", p)
	}
	if n := len(b.SucceededCharges()); n != 1 {
		t.Fatalf("want 1 charge, got %d", n)
	}
}

func TestRunsUntilSIGTERM(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	b := ridetest.Setup(t)
	key := abandon(t, b, b.Rider, "cmd-completer-key-running")

	p := proctest.Start(t, bin, env(b, "COMPLETER_INTERVAL=100ms"))
	proctest.WaitOutput(t, p, "Completer: pushed keys", 15*time.Second)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("want exit 0 after SIGTERM, got %d:\n%s", code, p.Output())
	}
	if !strings.Contains(p.Output(), "Completer: stopped") {
		t.Fatalf("want a clean stop logged:\n%s", p.Output())
	}
	if p := recoveryPoint(t, b, key); p != models.RecoveryPointFinished {
		t.Fatalf("want the key finished, got %s", p)
	}
}

func TestRefusesConfigurationThatLeavesNothingToComplete(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	_, errOut, code := proctest.Run(t, bin, []string{"DATABASE_URL=postgres://unused", "REAP_AFTER=30m"}, "-once")
	if code == 0 || !strings.Contains(errOut, "REAP_AFTER") {
		t.Fatalf("want a non-zero exit naming REAP_AFTER, got %d: %s", code, errOut)
	}
}
