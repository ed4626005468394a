package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

type testBundle struct {
	*ridetest.Bundle
	executor *phases.Executor
	reaper   *Reaper
}

// setup gives a test a database, the Stripe stand-in, riders, the executor the API would use to
// make keys the real way, and a reaper with the production thresholds.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := ridetest.Setup(t)
	logger := slog.New(slog.DiscardHandler)
	return &testBundle{
		Bundle:   b,
		executor: phases.New(b.Pool, b.StripeClient, logger, phases.Config{}),
		reaper:   New(b.Pool, logger, Config{}),
	}
}

var keySeq atomic.Int64

// request runs a ride request for rider, failing it with a Stripe 500 when fail is set (which
// leaves the key unlocked at ride_created, with its ride and a last_error), and returns its key
// aged by age, a Postgres interval such as '73 hours'.
func (b *testBundle) request(t *testing.T, rider *ridetest.Rider, fail bool, age string) *models.IdempotencyKey {
	t.Helper()
	ctx := context.Background()
	req := &phases.CreateRideRequest{
		KeyedRequest: phases.KeyedRequest{
			User:           rider.User,
			IdempotencyKey: fmt.Sprintf("reaper-test-key-%06d", keySeq.Add(1)),
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: phases.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863},
	}
	if fail {
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
	}
	if _, err := b.executor.CreateRide(ctx, req); (err != nil) != fail {
		t.Fatalf("want the request to fail: %t, got %v", fail, err)
	}
	key, err := models.IdempotencyKeyGetForUpdate(ctx, b.Pool, rider.ID, req.IdempotencyKey)
	if err != nil {
		t.Fatal(err)
	}
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - $2::interval,
		last_run_at = now() - $2::interval + interval '1 minute' WHERE id = $1`, key.ID, age)
	key, err = models.IdempotencyKeyGetByIDForUpdate(ctx, b.Pool, key.UserID, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// insertKeys writes n unfinished keys of rider straight into the table, at started, unlocked,
// created age ago (a Postgres interval) and one second apart, the first the oldest.
func (b *testBundle) insertKeys(t *testing.T, rider *ridetest.Rider, n int, age string) {
	t.Helper()
	b.Exec(t, `
		INSERT INTO idempotency_keys (created_at, idempotency_key, last_run_at, locked_at,
			request_method, request_params, request_path, origin_ip, recovery_point,
			stripe_idempotency_key, user_id)
		SELECT now() - $3::interval - make_interval(secs => $2 - i), 'bulk-test-key-' || lpad(i::text, 8, '0'),
			now() - $3::interval, NULL, 'POST', '{"origin_lat":1,"origin_lon":2,"target_lat":3,"target_lon":4}',
			'/rides', '203.0.113.7', 'started', 'rocket-rides-bulk-test-' || lpad(i::text, 8, '0'), $1
		FROM generate_series(1, $2) AS i`, rider.ID, n, age)
}

// runOnce runs a pass and requires it to end without error with the given counts.
func (b *testBundle) runOnce(t *testing.T, r *Reaper, want Result) {
	t.Helper()
	res, err := r.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %s", err)
	}
	if *res != want {
		t.Fatalf("want %+v, got %+v", want, *res)
	}
}

// keyExists reports whether key is still in the table.
func (b *testBundle) keyExists(t *testing.T, key *models.IdempotencyKey) bool {
	t.Helper()
	return b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE id = $1`, key.ID) == 1
}
