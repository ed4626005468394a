package phases

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
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
}
