package phases

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// tracedPool opens a second pool on the bundle's database whose connections report every query
// to tracer, set up as the service's are, of at most maxConns connections (0: pgxpool's default).
// It is closed when t ends.
func (b *testBundle) tracedPool(t *testing.T, tracer pgx.QueryTracer, maxConns int32) *pgxpool.Pool {
	t.Helper()
	config, err := pgxpool.ParseConfig(b.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	config.ConnConfig.Tracer = tracer
	config.ConnConfig.OnNotice = models.RecordSerializationWarnings
	if maxConns > 0 {
		config.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

type testBundle struct {
	*ridetest.Bundle
	executor *Executor
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := ridetest.Setup(t)
	return &testBundle{
		Bundle: b,
		// An hour's lease is never renewed within a test, so that tests that play another
		// request taking a key over are not raced by the renewals; TestLease has short ones.
		// Generous bounds on retries and phases, so that a loaded machine (a try once took
		// 2.8 s in a full -race run) does not turn a test of retrying into a failure; the tests
		// of the bounds themselves set their own.
		executor: New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
			SimulateErrors:      true,
			LockLease:           time.Hour,
			ConflictRetryBudget: 30 * time.Second,
			PhaseTimeout:        time.Minute,
		}),
	}
}

var testParams = RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863}

const testKey = "key-0ccb7813-e63d-4377-93c5-476cb93038f3"

func newRequest(rider *ridetest.Rider) *CreateRideRequest {
	return &CreateRideRequest{
		KeyedRequest: KeyedRequest{
			User:           rider.User,
			IdempotencyKey: testKey,
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: testParams,
	}
}

// key loads the test key of rider as it stands in the database.
func (b *testBundle) key(t *testing.T, rider *ridetest.Rider) *models.IdempotencyKey {
	t.Helper()
	return b.keyNamed(t, rider, testKey)
}

// keyNamed loads rider's key name as it stands in the database.
func (b *testBundle) keyNamed(t *testing.T, rider *ridetest.Rider, name string) *models.IdempotencyKey {
	t.Helper()
	key, err := models.IdempotencyKeyGetForUpdate(context.Background(), b.Pool, rider.ID, name)
	if err != nil {
		t.Fatalf("error loading key %s: %s", name, err)
	}
	return key
}

// requireUnlockedAt checks that a failed request left its key unlocked at point.
func (b *testBundle) requireUnlockedAt(t *testing.T, rider *ridetest.Rider, point models.RecoveryPoint) *models.IdempotencyKey {
	t.Helper()
	return b.requireKeyUnlockedAt(t, rider, testKey, point)
}

// requireKeyUnlockedAt checks that a failed request left rider's key name unlocked at point.
func (b *testBundle) requireKeyUnlockedAt(t *testing.T, rider *ridetest.Rider, name string, point models.RecoveryPoint) *models.IdempotencyKey {
	t.Helper()
	key := b.keyNamed(t, rider, name)
	if key.RecoveryPoint != point {
		t.Fatalf("want recovery point %s, got %s", point, key.RecoveryPoint)
	}
	if key.LockedAt != nil || key.LockedUntil != nil {
		t.Fatalf("want key unlocked, locked at %v until %v", key.LockedAt, key.LockedUntil)
	}
	return key
}

// requireCreated checks a 201 outcome and returns its body.
func requireCreated(t *testing.T, outcome *Outcome, err error) resource.RideCreated {
	t.Helper()
	if err != nil {
		t.Fatalf("want 201, got error: %s", err)
	}
	if outcome.StatusCode != 201 {
		t.Fatalf("want 201, got %d: %s", outcome.StatusCode, outcome.Body)
	}
	var body resource.RideCreated
	if err := json.Unmarshal(outcome.Body, &body); err != nil {
		t.Fatalf("error decoding body %s: %s", outcome.Body, err)
	}
	return body
}

// requireCreate runs req and requires a 201.
func (b *testBundle) requireCreate(t *testing.T, req *CreateRideRequest) resource.RideCreated {
	t.Helper()
	outcome, err := b.executor.CreateRide(context.Background(), req)
	return requireCreated(t, outcome, err)
}

// requireOneChargedRide checks the rows and charges a single successful request leaves.
func (b *testBundle) requireOneChargedRide(t *testing.T, rider *ridetest.Rider) {
	t.Helper()
	key := b.key(t, rider)
	if key.RecoveryPoint != models.RecoveryPointFinished || key.LockedAt != nil || key.LockedUntil != nil || *key.ResponseCode != 201 {
		t.Fatalf("want key finished with 201 and unlocked, got %s %v locked %v", key.RecoveryPoint, key.ResponseCode, key.LockedAt)
	}
	if n := b.Count(t, `SELECT count(*) FROM rides WHERE user_id = $1`, rider.ID); n != 1 {
		t.Fatalf("want 1 ride, got %d", n)
	}
	if n := b.Count(t, `SELECT count(*) FROM audit_records WHERE user_id = $1 AND action = 'ride.created'`, rider.ID); n != 1 {
		t.Fatalf("want 1 audit record, got %d", n)
	}
	if n := b.Count(t, `SELECT count(*) FROM staged_jobs WHERE job_name = 'send_ride_receipt' AND (job_args->>'user_id')::bigint = $1`, rider.ID); n != 1 {
		t.Fatalf("want 1 staged receipt job, got %d", n)
	}
	charges := b.Stripe.ChargesForIdempotencyKey(key.StripeIdempotencyKey)
	if len(charges) != 1 || charges[0].Status != "succeeded" {
		t.Fatalf("want 1 succeeded charge for the key, got %+v", charges)
	}
	if n := len(b.SucceededCharges()); n != 1 {
		t.Fatalf("want Stripe to hold 1 charge in all, got %d", n)
	}
	ride, err := models.RideGetByIdempotencyKeyID(context.Background(), b.Pool, key.UserID, key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ride.StripeChargeID == nil || *ride.StripeChargeID != charges[0].ID {
		t.Fatalf("want ride charged with %s, got %v", charges[0].ID, ride.StripeChargeID)
	}
}

// leaveBeforeCharge runs the test request of rider with raise_error, which fails it right after
// the first atomic phase committed, and checks that it left the key unlocked at ride_created.
func (b *testBundle) leaveBeforeCharge(t *testing.T, rider *ridetest.Rider) *models.IdempotencyKey {
	t.Helper()
	req := newRequest(rider)
	req.RaiseError = true
	if _, err := b.executor.CreateRide(context.Background(), req); !errors.Is(err, ErrSimulated) {
		t.Fatalf("want ErrSimulated, got %v", err)
	}
	return b.requireUnlockedAt(t, rider, models.RecoveryPointRideCreated)
}

// failAt returns an inPhase hook that fails the phase running at point, which rolls back its
// whole atomic phase.
func failAt(point models.RecoveryPoint) func(context.Context, models.DBTX, models.RecoveryPoint) error {
	return func(_ context.Context, _ models.DBTX, p models.RecoveryPoint) error {
		if p == point {
			return errInjected
		}
		return nil
	}
}

var errInjected = errors.New("injected failure")
