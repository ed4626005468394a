package completer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

type testBundle struct {
	*ridetest.Bundle
	executor  *phases.Executor
	completer *Completer
}

// setup gives a test a database, the Stripe stand-in, riders, the executor the API would use,
// and a completer with the production thresholds.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := ridetest.Setup(t)
	logger := slog.New(slog.DiscardHandler)
	executor := phases.New(b.Pool, b.StripeClient, logger, phases.Config{})
	return &testBundle{
		Bundle:    b,
		executor:  executor,
		completer: New(b.Pool, executor, logger, Config{}),
	}
}

var testParams = phases.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863}

var keySeq atomic.Int64

// newRequest is a ride request from rider with a key of its own.
func newRequest(rider *ridetest.Rider) *phases.CreateRideRequest {
	return &phases.CreateRideRequest{
		KeyedRequest: phases.KeyedRequest{
			User:           rider.User,
			IdempotencyKey: fmt.Sprintf("completer-test-key-%04d", keySeq.Add(1)),
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: testParams,
	}
}

// leaveAt leaves a request at point, as one whose client gave up after an error would, and
// returns its key. At ride_created the failure is a real one, Stripe answering 500; keys at the
// other points are what an older release, which committed every phase on its own, left.
func (b *testBundle) leaveAt(t *testing.T, rider *ridetest.Rider, point models.RecoveryPoint) *models.IdempotencyKey {
	t.Helper()
	req := newRequest(rider)
	switch point {
	case models.RecoveryPointStarted:
		// This release commits started together with ride_created; a key at started is one
		// left by an older release, which committed every phase on its own.
		params, _ := json.Marshal(req.Params)
		b.Exec(t, `INSERT INTO idempotency_keys (id, idempotency_key, locked_at, request_method,
			request_params, request_path, origin_ip, recovery_point, stripe_idempotency_key, user_id)
			VALUES (random_id(), $1, NULL, 'POST', $2, '/rides', '203.0.113.7', 'started', $3, $4)`,
			req.IdempotencyKey, params, "rocket-rides-"+req.IdempotencyKey, rider.ID)
	case models.RecoveryPointRideCreated:
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		if _, err := b.executor.CreateRide(context.Background(), req); err == nil {
			t.Fatalf("want the request to fail at %s", point)
		}
	case models.RecoveryPointChargeCreated:
		// Charged, then the atomic phase after the charge failed: left at ride_created. An older
		// release committed the charge on its own, at charge_created; make the key such a one.
		mend := b.breakInserts(t, "staged_jobs")
		_, err := b.executor.CreateRide(context.Background(), req)
		mend()
		if err == nil {
			t.Fatalf("want the request to fail at %s", point)
		}
		charge := b.Stripe.ChargesForIdempotencyKey(b.key(t, rider, req.IdempotencyKey).StripeIdempotencyKey)
		if len(charge) != 1 {
			t.Fatalf("want the ride charged, got %+v", charge)
		}
		b.Exec(t, `UPDATE rides SET stripe_charge_id = $1 WHERE user_id = $2`, charge[0].ID, rider.ID)
		b.Exec(t, `UPDATE idempotency_keys SET recovery_point = 'charge_created' WHERE user_id = $1`, rider.ID)
	default:
		t.Fatalf("bug: cannot leave a request at %s", point)
	}
	key := b.key(t, rider, req.IdempotencyKey)
	if key.RecoveryPoint != point || key.LockedAt != nil {
		t.Fatalf("want the key unlocked at %s, got %s locked %v", point, key.RecoveryPoint, key.LockedAt)
	}
	return key
}

// abandon leaves a request at point and ages it past the completer's thresholds: created
// 10 min ago, last run 2 min ago.
func (b *testBundle) abandon(t *testing.T, rider *ridetest.Rider, point models.RecoveryPoint) *models.IdempotencyKey {
	t.Helper()
	key := b.leaveAt(t, rider, point)
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '10 minutes',
		last_run_at = now() - interval '2 minutes' WHERE id = $1`, key.ID)
	return key
}

// breakInserts makes every insert into table fail until the returned function mends it.
func (b *testBundle) breakInserts(t *testing.T, table string) (mend func()) {
	t.Helper()
	b.Exec(t, `CREATE OR REPLACE FUNCTION test_fail_insert() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'test: inserts into % are broken', TG_TABLE_NAME; END $$`)
	b.Exec(t, `CREATE TRIGGER test_fail_insert BEFORE INSERT ON `+table+
		` FOR EACH ROW EXECUTE FUNCTION test_fail_insert()`)
	return func() { b.Exec(t, `DROP TRIGGER test_fail_insert ON `+table) }
}

// key loads a key as it stands in the database.
func (b *testBundle) key(t *testing.T, rider *ridetest.Rider, key string) *models.IdempotencyKey {
	t.Helper()
	k, err := models.IdempotencyKeyGetForUpdate(context.Background(), b.Pool, rider.ID, key)
	if err != nil {
		t.Fatalf("error loading key: %s", err)
	}
	return k
}

// reload loads key again.
func (b *testBundle) reload(t *testing.T, key *models.IdempotencyKey) *models.IdempotencyKey {
	t.Helper()
	k, err := models.IdempotencyKeyGetByIDForUpdate(context.Background(), b.Pool, key.UserID, key.ID)
	if err != nil {
		t.Fatalf("error reloading key: %s", err)
	}
	return k
}

// runOnce runs a pass and requires it to end without error with the given counts.
func (b *testBundle) runOnce(t *testing.T, c *Completer, want Result) {
	t.Helper()
	res, err := c.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %s", err)
	}
	if *res != want {
		t.Fatalf("want %+v, got %+v", want, *res)
	}
}

// requireFinishedCharged checks what a request pushed to a 201 leaves behind: the key finished
// and unlocked, its ride charged by the one Stripe charge made with the key's Stripe key, and
// the receipt staged for that ride.
func (b *testBundle) requireFinishedCharged(t *testing.T, key *models.IdempotencyKey) {
	t.Helper()
	ctx := context.Background()
	key = b.reload(t, key)
	if key.RecoveryPoint != models.RecoveryPointFinished || key.LockedAt != nil || key.ResponseCode == nil || *key.ResponseCode != 201 {
		t.Fatalf("want key finished with 201 and unlocked, got %s %v locked %v", key.RecoveryPoint, key.ResponseCode, key.LockedAt)
	}
	charges := b.Stripe.ChargesForIdempotencyKey(key.StripeIdempotencyKey)
	if len(charges) != 1 || charges[0].Status != fakestripe.ChargeStatusSucceeded || charges[0].Amount != phases.RideAmountCents {
		t.Fatalf("want 1 succeeded $20.00 charge for the key, got %+v", charges)
	}
	ride, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, key.UserID, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ride.StripeChargeID == nil || *ride.StripeChargeID != charges[0].ID {
		t.Fatalf("want ride charged with %s, got %v", charges[0].ID, ride.StripeChargeID)
	}
	if n := b.Count(t, `SELECT count(*) FROM rides WHERE user_id = $1`, key.UserID); n != 1 {
		t.Fatalf("want 1 ride for the user, got %d", n)
	}
	if n := b.Count(t, `SELECT count(*) FROM staged_jobs WHERE job_name = $1 AND (job_args->>'ride_id')::bigint = $2`,
		jobargs.SendRideReceiptKind, ride.ID); n != 1 {
		t.Fatalf("want 1 staged receipt for the ride, got %d", n)
	}
}

// requireUntouched checks that a pass left key as it was and asked Stripe nothing.
func (b *testBundle) requireUntouched(t *testing.T, before *models.IdempotencyKey, chargeRequests int) {
	t.Helper()
	after := b.reload(t, before)
	if after.RecoveryPoint != before.RecoveryPoint || !after.LastRunAt.Equal(before.LastRunAt) ||
		!sameTime(after.LockedUntil, before.LockedUntil) || after.LockGeneration != before.LockGeneration {
		t.Fatalf("want key untouched, was %s run %s locked until %v (generation %d), is %s run %s locked until %v (generation %d)",
			before.RecoveryPoint, before.LastRunAt, before.LockedUntil, before.LockGeneration,
			after.RecoveryPoint, after.LastRunAt, after.LockedUntil, after.LockGeneration)
	}
	if n := b.Stripe.ChargeRequests(); n != chargeRequests {
		t.Fatalf("want no charge request, Stripe saw %d more", n-chargeRequests)
	}
}

// sameTime reports whether two optional times are both unset or the same instant.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
