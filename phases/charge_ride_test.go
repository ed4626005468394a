package phases

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
)

func TestChargeRide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	requireUnavailable := func(t *testing.T, err error) {
		t.Helper()
		var unavailable *PaymentUnavailableError
		if !errors.As(err, &unavailable) {
			t.Fatalf("want PaymentUnavailableError, got %v", err)
		}
	}

	t.Run("Stripe500IsNotStoredAndRetrySucceeds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)

		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		key := b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)
		if key.ResponseCode != nil || key.ForeignMutationAttemptedAt == nil {
			t.Fatalf("want no stored response and a recorded charge attempt, got %v %v", key.ResponseCode, key.ForeignMutationAttemptedAt)
		}

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("ChargedButConnectionDroppedRetryGetsSameCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
		executor := New(b.Pool, b.FreshConnStripeClient(), b.executor.logger, Config{})

		_, err := executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want Stripe to have charged before the drop, got %d charges", n)
		}
		b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("StripeTimeoutIsNotStored", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultTimeout, 1)

		// The request's own timeout is an hour, and the stand-in holds the charge for minutes
		// (fakestripe's TimeoutFaultHang): a call that ends within one gave up on the Stripe
		// timeout, however loaded the machine.
		executor := New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
			LockLease: time.Hour, ConflictRetryBudget: 30 * time.Second, PhaseTimeout: time.Minute, RequestTimeout: time.Hour,
		})
		start := time.Now()
		_, err := executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		if elapsed := time.Since(start); elapsed > time.Minute {
			t.Fatalf("want the call to give up after the Stripe timeout (%s), took %s", ridetest.StripeTimeout, elapsed)
		}
		b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("StripeRejectingOurAPIKeyIsNotStored", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		badStripe := stripeclient.New(stripeclient.Config{APIKey: "sk_live_not_ours", URL: b.Stripe.URL, Timeout: ridetest.StripeTimeout})
		executor := New(b.Pool, badStripe, b.executor.logger, Config{})

		_, err := executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("UnknownCustomerIsStoredAs402", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Exec(t, `UPDATE users SET stripe_customer_id = 'cus_gone' WHERE id = $1`, b.Rider.ID)
		req := newRequest(b.Rider)
		req.User.StripeCustomerID = "cus_gone"

		outcome, err := b.executor.CreateRide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var p problem.Problem
		_ = json.Unmarshal(outcome.Body, &p)
		if outcome.StatusCode != 402 || p.Code != problem.CodePaymentRejected {
			t.Fatalf("want stored 402 payment_rejected, got %d %s", outcome.StatusCode, outcome.Body)
		}
		// Stripe's message names our customer; neither reaches the rider nor the stored answer.
		var stored string
		if err := b.Pool.QueryRow(ctx, `SELECT response_body::text FROM idempotency_keys`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"No such customer", "cus_gone"} {
			if strings.Contains(string(outcome.Body), leak) || strings.Contains(stored, leak) {
				t.Fatalf("want no trace of Stripe's error, found %q in %s (stored %s)", leak, outcome.Body, stored)
			}
		}
	})

	// A request that outlived its lock must not commit anything once another request has taken
	// the key over, nor release the new holder's lock.
	t.Run("FencingStopsARequestWhoseLockWasTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		successor := New(b.Pool, b.StripeClient, b.executor.logger, Config{})

		var successorOutcome *Outcome
		b.executor.hooks.afterStripeCall = func(ctx context.Context) {
			// The first request stalls here past its lease; a retry takes over and finishes the
			// request while the first one still holds Stripe's answer.
			b.Exec(t, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second'`)
			var err error
			successorOutcome, err = successor.CreateRide(ctx, newRequest(b.Rider))
			requireCreated(t, successorOutcome, err)
		}

		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, ErrLockLost) {
			t.Fatalf("want ErrLockLost, got %v", err)
		}
		b.requireOneChargedRide(t, b.Rider)
		if n := b.Stripe.ChargeRequests(); n != 2 {
			t.Fatalf("want both requests to have asked Stripe (the second replayed), got %d", n)
		}

		b.executor.hooks.afterStripeCall = nil
		replay, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		if err != nil || !replay.Replayed || string(replay.Body) != string(successorOutcome.Body) {
			t.Fatalf("want the successor's response replayed, got %v %+v", err, replay)
		}
	})

	// takeOver simulates another request taking the key over while this one waits on Stripe: it
	// takes a new lock generation, as IdempotencyKeyLock would, and returns it.
	takeOver := func(t *testing.T, b *testBundle) int64 {
		var token int64
		if err := b.Pool.QueryRow(ctx, `UPDATE idempotency_keys SET locked_at = now(), locked_until = now() + interval '1 minute',
			lock_generation = lock_generation + 1 RETURNING lock_generation`).Scan(&token); err != nil {
			t.Fatal(err)
		}
		return token
	}

	t.Run("TakenOverRequestCommitsNothingAfterTheCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var successorToken int64
		b.executor.hooks.afterStripeCall = func(context.Context) { successorToken = takeOver(t, b) }

		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, ErrLockLost) {
			t.Fatalf("want ErrLockLost, got %v", err)
		}
		key := b.key(t, b.Rider)
		if key.RecoveryPoint != models.RecoveryPointRideCreated || key.LockedUntil == nil || key.LockGeneration != successorToken {
			t.Fatalf("want the key left at ride_created under the successor's lock, got %s generation %d until %v", key.RecoveryPoint, key.LockGeneration, key.LockedUntil)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE stripe_charge_id IS NOT NULL`); n != 0 {
			t.Fatal("want the charge id left for the successor to record")
		}
	})

	t.Run("TakenOverRequestDoesNotReleaseTheSuccessorsLock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		var successorToken int64
		b.executor.hooks.afterStripeCall = func(context.Context) { successorToken = takeOver(t, b) }

		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		key := b.key(t, b.Rider)
		if key.LockedUntil == nil || key.LockGeneration != successorToken || key.LastError != nil {
			t.Fatalf("want the successor's lock untouched, got generation %d until %v last_error %v", key.LockGeneration, key.LockedUntil, key.LastError)
		}
	})

	t.Run("ChargeMadeButNotRecordedIsRecoveredByRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		phasesAtRideCreated := 0
		b.executor.hooks.inPhase = func(_ context.Context, _ models.DBTX, p models.RecoveryPoint) error {
			if p == models.RecoveryPointRideCreated {
				if phasesAtRideCreated++; phasesAtRideCreated == 2 { // the phase that records the charge
					return errInjected
				}
			}
			return nil
		}
		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, errInjected) {
			t.Fatalf("want the injected error, got %v", err)
		}
		b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want Stripe to hold the unrecorded charge, got %d", n)
		}

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})

	requireNeedsReview := func(t *testing.T, b *testBundle, outcome *Outcome, err error, reason string) {
		t.Helper()
		if err != nil {
			t.Fatalf("want a stored answer, got error %v", err)
		}
		var p problem.Problem
		_ = json.Unmarshal(outcome.Body, &p)
		if outcome.StatusCode != 500 || p.Code != problem.CodePaymentNeedsReview {
			t.Fatalf("want stored 500 payment_needs_review, got %d %s", outcome.StatusCode, outcome.Body)
		}
		key := b.key(t, b.Rider)
		if key.RecoveryPoint != models.RecoveryPointFinished {
			t.Fatalf("want key finished, got %s", key.RecoveryPoint)
		}
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE reason = $1 AND idempotency_key_id = $2 AND ride_id IS NOT NULL AND last_error <> ''`,
			reason, key.ID); n != 1 {
			t.Fatalf("want the request recorded for review as %s, got %d rows", reason, n)
		}
	}

	t.Run("SavedStripeErrorIsNotRetriedForever", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500Saved, 1)

		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err) // the first 500 may be a passing failure

		// The retry gets the same 500 replayed by Stripe: retrying can never settle it.
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireNeedsReview(t, b, outcome, err, models.AbandonedReasonStripeReplayedError)
	})

	t.Run("StripeKeyUsedWithOtherParamsNeedsReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
		executor := New(b.Pool, b.FreshConnStripeClient(), b.executor.logger, Config{})
		_, err := executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)

		// The rider's Stripe customer changes before the retry: the same key, other params.
		other := b.NewRider(t, "tok_visa")
		req := newRequest(b.Rider)
		req.User.StripeCustomerID = other.StripeCustomerID

		outcome, err := executor.CreateRide(ctx, req)
		requireNeedsReview(t, b, outcome, err, models.AbandonedReasonStripeKeyConflict)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want still exactly 1 charge, got %d", n)
		}
	})

	t.Run("ChargeAttemptOlderThan23HoursIsNotResent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultTimeout, 1)
		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		requests := b.Stripe.ChargeRequests()

		// Stripe forgets idempotency keys after 24 hours.
		b.Exec(t, `UPDATE idempotency_keys SET charge_attempted_at = now() - interval '23 hours 1 minute'`)

		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		if err != nil {
			t.Fatal(err)
		}
		var p problem.Problem
		_ = json.Unmarshal(outcome.Body, &p)
		if outcome.StatusCode != 500 || p.Code != problem.CodePaymentNeedsReview {
			t.Fatalf("want stored 500 payment_needs_review, got %d %s", outcome.StatusCode, outcome.Body)
		}
		if b.Stripe.ChargeRequests() != requests {
			t.Fatal("want no charge re-sent")
		}
		key := b.key(t, b.Rider)
		if key.RecoveryPoint != models.RecoveryPointFinished {
			t.Fatalf("want key finished, got %s", key.RecoveryPoint)
		}
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE reason = $1 AND idempotency_key_id = $2 AND ride_id IS NOT NULL`,
			models.AbandonedReasonStripeKeyExpired, key.ID); n != 1 {
			t.Fatalf("want the request recorded for review, got %d rows", n)
		}
	})

	t.Run("ChargeAttemptJustUnder23HoursIsResent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireUnavailable(t, err)
		b.Exec(t, `UPDATE idempotency_keys SET charge_attempted_at = now() - interval '22 hours 59 minutes'`)

		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})
}
