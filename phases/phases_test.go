package phases

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
)

func TestCreateRide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("NewKeyCreatesAndChargesOneRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		body := requireCreated(t, outcome, err)
		if outcome.Replayed {
			t.Fatal("a first request is not a replay")
		}
		b.requireOneChargedRide(t, b.Rider)

		charge := b.SucceededCharges()[0]
		if charge.Amount != 2000 || charge.Currency != "usd" || charge.Customer != b.Rider.StripeCustomerID {
			t.Fatalf("want $20.00 usd charged to %s, got %+v", b.Rider.StripeCustomerID, charge)
		}
		key := b.key(t, b.Rider)
		if charge.IdempotencyKey != key.StripeIdempotencyKey || charge.IdempotencyKey == testKey {
			t.Fatalf("want the charge sent with the key's own Stripe idempotency key %q, got %q", key.StripeIdempotencyKey, charge.IdempotencyKey)
		}
		if body.Ride.StripeChargeID == nil || *body.Ride.StripeChargeID != charge.ID || body.Ride.OriginLat != testParams.OriginLat {
			t.Fatalf("unexpected ride in body: %+v", body.Ride)
		}

		// The receipt job as the enqueuer and the worker read it, ride_id a string: written out
		// here rather than taken from the args type, whose encoding this pins.
		wantArgs := fmt.Sprintf(`{"ride_id":"%d","user_id":%d,"amount":2000,"currency":"usd"}`, body.Ride.ID, b.Rider.ID)
		var jobName, args string
		var same bool
		if err := b.Pool.QueryRow(ctx, `SELECT job_name, job_args::text, job_args = $1::jsonb FROM staged_jobs`, wantArgs).Scan(&jobName, &args, &same); err != nil {
			t.Fatal(err)
		}
		if jobName != "send_ride_receipt" || !same {
			t.Fatalf("want a send_ride_receipt job staged with %s, got %s with %s", wantArgs, jobName, args)
		}

		var origin string
		if err := b.Pool.QueryRow(ctx, `SELECT host(origin_ip) FROM audit_records`).Scan(&origin); err != nil {
			t.Fatal(err)
		}
		if origin != "203.0.113.7" {
			t.Fatalf("want audit origin 203.0.113.7, got %s", origin)
		}
	})

	t.Run("FinishedKeyReplaysStoredResponse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		first, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireCreated(t, first, err)
		requests := b.Stripe.ChargeRequests()

		second, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireCreated(t, second, err)
		if !second.Replayed || !bytes.Equal(first.Body, second.Body) {
			t.Fatalf("want a replay of %s, got replayed=%t %s", first.Body, second.Replayed, second.Body)
		}
		if b.Stripe.ChargeRequests() != requests {
			t.Fatal("a replay must not call Stripe")
		}
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("ParamsMismatchIsRejectedAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.requireCreate(t, newRequest(b.Rider))

		req := newRequest(b.Rider)
		req.Params.TargetLat = 0
		if _, err := b.executor.CreateRide(ctx, req); !errors.Is(err, ErrParamsMismatch) {
			t.Fatalf("want ErrParamsMismatch, got %v", err)
		}
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("SameKeyFromTwoUsersMakesTwoRides", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other := b.NewRider(t, "tok_visa")

		b.requireCreate(t, newRequest(b.Rider))
		b.requireCreate(t, newRequest(other))
		if n := len(b.SucceededCharges()); n != 2 {
			t.Fatalf("want 2 charges, got %d", n)
		}
		if n := b.Count(t, `SELECT count(DISTINCT user_id) FROM rides`); n != 2 {
			t.Fatalf("want rides for 2 users, got %d", n)
		}
	})

	t.Run("KeyLockedNowIsInUse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.leaveBeforeCharge(t, b.Rider)
		// Another request holds it now.
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now(), locked_until = now() + interval '1 minute',
			lock_generation = lock_generation + 1`)

		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, ErrKeyInUse) {
			t.Fatalf("want ErrKeyInUse, got %v", err)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides`); n != 1 {
			t.Fatalf("want the one ride of the first run, got %d", n)
		}
		if n := b.Stripe.ChargeRequests(); n != 0 {
			t.Fatalf("want no charge sent, got %d", n)
		}
	})

	t.Run("FailureBeforeTheChargeStoresNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.executor.hooks.inPhase = failAt(models.RecoveryPointStarted)
		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, errInjected) {
			t.Fatalf("want injected error, got %v", err)
		}
		// The key, the ride and the audit record are one atomic phase: none of them is left.
		for _, table := range []string{"idempotency_keys", "rides", "audit_records"} {
			if n := b.Count(t, `SELECT count(*) FROM `+table); n != 0 {
				t.Fatalf("want no rows in %s, got %d", table, n)
			}
		}
		b.executor.hooks.inPhase = nil
		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("StaleLockIsTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.leaveBeforeCharge(t, b.Rider)
		// A request that died without unlocking: its lease ran out a moment ago.
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '6 seconds',
			locked_until = now() - interval '1 second', lock_generation = lock_generation + 1`)

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("CardDeclinedIsStoredAs402", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		outcome, err := b.executor.CreateRide(ctx, newRequest(b.DecliningRider))
		if err != nil {
			t.Fatal(err)
		}
		var p problem.Problem
		if err := json.Unmarshal(outcome.Body, &p); err != nil {
			t.Fatal(err)
		}
		if outcome.StatusCode != 402 || p.Code != problem.CodeCardDeclined || p.Status != 402 || p.Detail == "" {
			t.Fatalf("want stored 402 card_declined, got %d %s", outcome.StatusCode, outcome.Body)
		}

		key := b.key(t, b.DecliningRider)
		if key.RecoveryPoint != models.RecoveryPointFinished || *key.ResponseCode != 402 {
			t.Fatalf("want key finished with 402, got %s", key.RecoveryPoint)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE stripe_charge_id IS NOT NULL`); n != 0 {
			t.Fatalf("want no charged ride, got %d", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE status = 'declined'`); n != 1 {
			t.Fatalf("want the ride declined, got %d declined rides", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM staged_jobs`); n != 0 {
			t.Fatalf("want no receipt staged, got %d", n)
		}

		replay, err := b.executor.CreateRide(ctx, newRequest(b.DecliningRider))
		if err != nil || !replay.Replayed || replay.StatusCode != 402 || !bytes.Equal(replay.Body, outcome.Body) {
			t.Fatalf("want the 402 replayed, got %v %+v", err, replay)
		}
	})

	t.Run("RaiseErrorNeedsSimulateErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		executor := New(b.Pool, b.StripeClient, b.executor.logger, Config{})
		req := newRequest(b.Rider)
		req.RaiseError = true
		if _, err := executor.CreateRide(ctx, req); !errors.Is(err, ErrSimulationDisabled) {
			t.Fatalf("want ErrSimulationDisabled, got %v", err)
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("want nothing stored, got %d keys", n)
		}
	})
}

// TestResume covers a request picked up again at each recovery point, as a retry after a crash
// or an error finds it.
func TestResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// resume retries the test request and requires it to finish with one charged ride.
	resume := func(t *testing.T, b *testBundle) {
		t.Helper()
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireCreated(t, outcome, err)
		if outcome.Replayed {
			t.Fatal("a resumed request is not a replay")
		}
		b.requireOneChargedRide(t, b.Rider)
	}

	// A key at started is left only by a release that committed every phase on its own; this
	// one commits started together with ride_created. Such keys must still resume.
	t.Run("FromStarted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		params, _ := json.Marshal(testParams)
		b.Exec(t, `INSERT INTO idempotency_keys (id, idempotency_key, locked_at, request_method,
			request_params, request_path, origin_ip, recovery_point, stripe_idempotency_key, user_id)
			VALUES (random_id(), $1, NULL, 'POST', $2, '/rides', '203.0.113.7', 'started',
				'rocket-rides-test-from-started', $3)`, testKey, params, b.Rider.ID)
		resume(t, b)
	})

	t.Run("FromRideCreatedBeforeTheCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.leaveBeforeCharge(t, b.Rider)
		resume(t, b)
	})

	t.Run("FromRideCreatedAfterTheCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.executor.hooks.inPhase = failAt(models.RecoveryPointChargeCreated)
		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, errInjected) {
			t.Fatalf("want injected error, got %v", err)
		}
		key := b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)
		if key.LastError == nil || *key.LastError != errInjected.Error() {
			t.Fatalf("want last_error recorded, got %v", key.LastError)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE stripe_charge_id IS NOT NULL`); n != 0 {
			t.Fatal("want the charge, recorded in the same atomic phase as the receipt, rolled back")
		}
		b.executor.hooks.inPhase = nil
		resume(t, b) // Stripe replays the charge: still one
		if n := b.Stripe.ChargeRequests(); n != 2 {
			t.Fatalf("want the charge sent again with the same Stripe key, got %d requests", n)
		}
	})

	// A key at charge_created, too, is left only by an older release.
	t.Run("FromChargeCreated", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.executor.hooks.inPhase = failAt(models.RecoveryPointChargeCreated)
		_, _ = b.executor.CreateRide(ctx, newRequest(b.Rider))
		b.executor.hooks.inPhase = nil
		charges := b.SucceededCharges()
		if len(charges) != 1 {
			t.Fatalf("want the charge made, got %+v", charges)
		}
		b.Exec(t, `UPDATE rides SET stripe_charge_id = $1`, charges[0].ID)
		b.Exec(t, `UPDATE idempotency_keys SET recovery_point = 'charge_created'`)
		resume(t, b)
		if n := b.Stripe.ChargeRequests(); n != 1 {
			t.Fatalf("want no charge sent again from charge_created, got %d requests", n)
		}
	})

	t.Run("InternalErrorBeforeChargeUnlocksAtRideCreated", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.leaveBeforeCharge(t, b.Rider)
		if b.Stripe.ChargeRequests() != 0 {
			t.Fatal("want no charge attempted")
		}

		// raise_error is not part of the compared params: the retry without it matches.
		resume(t, b)
	})
}

// recordingFaults remembers the fault points a request passed.
type recordingFaults struct{ points []FaultPoint }

func (r *recordingFaults) At(_ context.Context, point FaultPoint) { r.points = append(r.points, point) }

func TestFaultPoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	faults := &recordingFaults{}
	executor := New(b.Pool, b.StripeClient, b.executor.logger, Config{Faults: faults})

	if _, err := executor.CreateRide(context.Background(), newRequest(b.Rider)); err != nil {
		t.Fatal(err)
	}
	want := []FaultPoint{FaultPointRideCreated, FaultPointChargeAnswered, FaultPointFinished}
	if fmt.Sprint(faults.points) != fmt.Sprint(want) {
		t.Fatalf("want fault points %v in order, got %v", want, faults.points)
	}

	faults.points = nil
	if _, err := executor.CreateRide(context.Background(), newRequest(b.Rider)); err != nil {
		t.Fatal(err)
	}
	if len(faults.points) != 0 {
		t.Fatalf("want a replay to pass no fault point, got %v", faults.points)
	}
}
