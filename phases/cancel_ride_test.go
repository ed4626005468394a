package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

const cancelKey = "cancel-5b0e3c1e-9a4f-4c3e-8d2a-0f6e1c2b7a90"

func newCancel(rider *ridetest.Rider, rideID int64, key string) *CancelRideRequest {
	return &CancelRideRequest{
		KeyedRequest: KeyedRequest{
			User:           rider.User,
			IdempotencyKey: key,
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		RideID: rideID,
	}
}

// bookedRide books the test ride of rider and returns it.
func (b *testBundle) bookedRide(t *testing.T, rider *ridetest.Rider) resource.Ride {
	t.Helper()
	return b.requireCreate(t, newRequest(rider)).Ride
}

// requireCancelled checks a cancel's 200 and returns the ride it answered with.
func requireCancelled(t *testing.T, outcome *Outcome, err error) resource.Ride {
	t.Helper()
	if err != nil {
		t.Fatalf("want 200, got error: %s", err)
	}
	if outcome.StatusCode != 200 {
		t.Fatalf("want 200, got %d: %s", outcome.StatusCode, outcome.Body)
	}
	var body resource.RideCreated
	if err := json.Unmarshal(outcome.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Ride.Status != "cancelled" || body.Ride.StripeRefundID == nil {
		t.Fatalf("want the ride cancelled with its refund, got %s", outcome.Body)
	}
	return body.Ride
}

// requireProblem checks a stored problem answer.
func requireProblem(t *testing.T, outcome *Outcome, err error, status int, code problem.Code) {
	t.Helper()
	if err != nil {
		t.Fatalf("want %d %s, got error: %s", status, code, err)
	}
	var p problem.Problem
	if err := json.Unmarshal(outcome.Body, &p); err != nil {
		t.Fatal(err)
	}
	if outcome.StatusCode != status || p.Code != code {
		t.Fatalf("want %d %s, got %d: %s", status, code, outcome.StatusCode, outcome.Body)
	}
}

// requireRefunds checks how many refunds the stand-in holds for a charge.
func (b *testBundle) requireRefunds(t *testing.T, chargeID string, want int) {
	t.Helper()
	n := 0
	for _, refund := range b.Stripe.Refunds() {
		if refund.Charge == chargeID {
			n++
		}
	}
	if n != want {
		t.Fatalf("want %d refunds of %s at Stripe, got %d", want, chargeID, n)
	}
}

// requireRefundReceiptStaged checks that one refund receipt of ride rideID is staged, for amount.
func (b *testBundle) requireRefundReceiptStaged(t *testing.T, rideID, amount int64) {
	t.Helper()
	if n := b.Count(t, `SELECT count(*) FROM staged_jobs WHERE job_name = 'send_refund_receipt'
		AND (job_args->>'ride_id')::bigint = $1 AND (job_args->>'amount')::bigint = $2`, rideID, amount); n != 1 {
		t.Errorf("want 1 staged refund receipt of ride %d for %d, got %d", rideID, amount, n)
	}
}

// requireOneRefundedRide checks the rows and refunds a cancel that settled its refund leaves,
// as requireOneChargedRide does a booking's: rider's cancel key finished with a 200, one refund
// at Stripe, made under that key and recorded on the ride it answered with, now cancelled; one
// audit record of the cancel and one refund receipt staged.
func (b *testBundle) requireOneRefundedRide(t *testing.T, rider *ridetest.Rider, ride resource.Ride) {
	t.Helper()
	key := b.keyNamed(t, rider, cancelKey)
	if key.RecoveryPoint != models.RecoveryPointFinished || key.LockedAt != nil || key.LockedUntil != nil || *key.ResponseCode != 200 {
		t.Fatalf("want key finished with 200 and unlocked, got %s %v locked %v", key.RecoveryPoint, key.ResponseCode, key.LockedAt)
	}
	refunds := b.Stripe.Refunds()
	if len(refunds) != 1 || refunds[0].IdempotencyKey != key.StripeIdempotencyKey || refunds[0].Charge != *ride.StripeChargeID {
		t.Fatalf("want Stripe to hold 1 refund in all, of the ride's charge under the key, got %+v", refunds)
	}
	stored, err := models.RideGetByIDForUser(context.Background(), b.Pool, ride.ID, rider.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != models.RideStatusCancelled || stored.StripeRefundID == nil || *stored.StripeRefundID != refunds[0].ID ||
		*ride.StripeRefundID != refunds[0].ID {
		t.Fatalf("want the ride cancelled with refund %s, got %s %v (answered %v)", refunds[0].ID, stored.Status, stored.StripeRefundID, ride.StripeRefundID)
	}
	if n := b.Count(t, `SELECT count(*) FROM audit_records WHERE resource_id = $1 AND action = 'ride.cancelled'`, ride.ID); n != 1 {
		t.Errorf("want 1 audit record of the cancel, got %d", n)
	}
	b.requireRefundReceiptStaged(t, ride.ID, RideAmountCents)
}

func TestCancelRide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("RefundsOnceAndReplays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)

		first, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		cancelled := requireCancelled(t, first, err)
		b.requireRefunds(t, *ride.StripeChargeID, 1)

		again, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, again, err)
		if !again.Replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("want the first answer replayed, got %s (replayed %t)", again.Body, again.Replayed)
		}
		b.requireOneRefundedRide(t, b.Rider, cancelled)
	})

	t.Run("AnotherKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)

		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey+"-2"))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyCancelled)
		b.requireRefunds(t, *ride.StripeChargeID, 1)

		// The refusal is that key's final answer.
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey+"-2"))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyCancelled)
		if !outcome.Replayed {
			t.Error("want the 409 replayed")
		}
	})

	// A cancel whose refund Stripe could not make yet still holds the ride: a second cancel,
	// under another key, must not refund it meanwhile.
	t.Run("ClaimHoldsWhileTheRefundIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		b.Stripe.InjectRefundFaults(fakestripe.FaultError500, 1)
		var unavailable *PaymentUnavailableError
		if _, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey)); !errors.As(err, &unavailable) {
			t.Fatalf("want the refund unavailable, got %v", err)
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey+"-2"))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyCancelled)
		b.requireRefunds(t, *ride.StripeChargeID, 0)

		// The first cancel's retry refunds it.
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)
		b.requireRefunds(t, *ride.StripeChargeID, 1)
	})

	t.Run("TwoKeysAtOnceRefundOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		var wg sync.WaitGroup
		outcomes := make([]*Outcome, 4)
		for i := range outcomes {
			wg.Go(func() {
				outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey+string(rune('a'+i))))
				if err != nil {
					t.Errorf("cancel %d: %s", i, err)
				}
				outcomes[i] = outcome
			})
		}
		wg.Wait()
		ok := 0
		for _, outcome := range outcomes {
			if outcome != nil && outcome.StatusCode == 200 {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("want exactly one cancel to succeed, got %d", ok)
		}
		b.requireRefunds(t, *ride.StripeChargeID, 1)
	})

	t.Run("AnotherRidersRideIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		other := b.NewRider(t, "tok_visa")
		outcome, err := b.executor.CancelRide(ctx, newCancel(other, ride.ID, cancelKey))
		requireProblem(t, outcome, err, 404, problem.CodeNotFound)
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, 12345, cancelKey))
		requireProblem(t, outcome, err, 404, problem.CodeNotFound)
		b.requireRefunds(t, *ride.StripeChargeID, 0)
	})

	t.Run("DeclinedRideWasNotCharged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.DecliningRider))
		requireProblem(t, outcome, err, 402, problem.CodeCardDeclined)
		var rideID int64
		if err := b.Pool.QueryRow(ctx, `SELECT id FROM rides WHERE user_id = $1`, b.DecliningRider.ID).Scan(&rideID); err != nil {
			t.Fatal(err)
		}
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.DecliningRider, rideID, cancelKey))
		requireProblem(t, outcome, err, 409, problem.CodeRideNotCharged)
		if n := len(b.Stripe.Refunds()); n != 0 {
			t.Fatalf("want no refund, got %d", n)
		}
	})

	// Once the reaper deleted the booking's key, the ride's status alone says it was declined.
	t.Run("DeclinedRideWithItsKeyReaped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.DecliningRider))
		requireProblem(t, outcome, err, 402, problem.CodeCardDeclined)
		b.Exec(t, `DELETE FROM idempotency_keys WHERE user_id = $1`, b.DecliningRider.ID)
		var rideID int64
		if err := b.Pool.QueryRow(ctx, `SELECT id FROM rides WHERE user_id = $1 AND idempotency_key_id IS NULL`,
			b.DecliningRider.ID).Scan(&rideID); err != nil {
			t.Fatal(err)
		}
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.DecliningRider, rideID, cancelKey))
		requireProblem(t, outcome, err, 409, problem.CodeRideNotCharged)
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests`); n != 0 {
			t.Fatalf("want nothing sent to review, got %d requests", n)
		}
	})

	t.Run("RideStillBookingIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.leaveBeforeCharge(t, b.Rider)
		ride, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, key.UserID, key.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey)); !errors.Is(err, ErrRideBookingInProgress) {
			t.Fatalf("want ErrRideBookingInProgress, got %v", err)
		}
		// Nothing was stored: once the booking finished, the same cancel refunds it.
		b.requireCreate(t, newRequest(b.Rider))
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)
	})

	t.Run("RefundedAtTheDashboard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.Stripe.RefundCharge(*ride.StripeChargeID); err != nil {
			t.Fatal(err)
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyRefunded)
		b.requireRefunds(t, *ride.StripeChargeID, 1)
		b.requireStatus(t, ride.ID, models.RideStatusRefunded)
	})

	// Part of the charge was refunded at Stripe's dashboard: the cancel refunds the rest, and the
	// refund receipt states what it gave back, not the fare.
	t.Run("PartlyRefundedAtTheDashboardRefundsTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.StripeClient.Refunds.New(&stripe.RefundParams{Charge: ride.StripeChargeID, Amount: stripe.Int64(5_00)}); err != nil {
			t.Fatal(err)
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)
		b.requireRefunds(t, *ride.StripeChargeID, 2)
		stored, err := models.RideGetByIDForUser(ctx, b.Pool, ride.ID, b.Rider.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := stored.StripeRefundAmount; got == nil || *got != 15_00 {
			t.Fatalf("want the refund of the 15.00 left recorded, got %s", outcome.Body)
		}
		b.requireRefundReceiptStaged(t, ride.ID, 15_00)
	})

	// The first cancel claimed the ride before Stripe said it was refunded already; a second
	// cancel is told that, not that another cancel took the ride.
	t.Run("RefundedAtTheDashboardAskedTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.Stripe.RefundCharge(*ride.StripeChargeID); err != nil {
			t.Fatal(err)
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyRefunded)
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey+"-2"))
		requireProblem(t, outcome, err, 409, problem.CodeRideAlreadyRefunded)
	})

	// A booking that went to review may have charged the rider; nothing can refund it until a
	// person knows, so the cancel goes to review too, rather than saying "not charged".
	t.Run("BookingUnderReviewGoesToReview", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500Saved, 1)
		if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); err == nil {
			t.Fatal("want the first try to fail")
		}
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireProblem(t, outcome, err, 500, problem.CodePaymentNeedsReview)
		var rideID int64
		if err := b.Pool.QueryRow(ctx, `SELECT id FROM rides WHERE user_id = $1`, b.Rider.ID).Scan(&rideID); err != nil {
			t.Fatal(err)
		}
		outcome, err = b.executor.CancelRide(ctx, newCancel(b.Rider, rideID, cancelKey))
		requireProblem(t, outcome, err, 500, problem.CodePaymentNeedsReview)
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE reason = 'charge_unknown' AND ride_id = $1`, rideID); n != 1 {
			t.Fatalf("want the cancel recorded for review with its ride, got %d", n)
		}
		if n := len(b.Stripe.Refunds()); n != 0 {
			t.Fatalf("want no refund, got %d", n)
		}
	})

	t.Run("DisputedAtTheBank", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.Stripe.DisputeCharge(*ride.StripeChargeID); err != nil {
			t.Fatal(err)
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireProblem(t, outcome, err, 409, problem.CodeRideDisputed)
		b.requireRefunds(t, *ride.StripeChargeID, 0)
		b.requireStatus(t, ride.ID, models.RideStatusDisputed)
	})

	// A dispute that arrives after the claim, while the refund is being recorded, outranks the
	// cancel: the ride stays disputed, with our refund recorded on it.
	t.Run("DisputeBetweenTheClaimAndTheRecordStands", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		var dispute stripe.Event
		if err := json.Unmarshal(fmt.Appendf(nil, `{"id":"evt_late_dispute","object":"event","type":"charge.dispute.created",`+
			`"created":%d,"data":{"object":{"id":"dp_late","object":"dispute","charge":%q}}}`,
			time.Now().Unix(), *ride.StripeChargeID), &dispute); err != nil {
			t.Fatal(err)
		}
		disputed := false
		b.executor.hooks.inPhase = func(ctx context.Context, _ models.DBTX, p models.RecoveryPoint) error {
			if p != models.RecoveryPointStarted || len(b.Stripe.Refunds()) == 0 || disputed {
				return nil
			}
			disputed = true // atomic phase 2 read the ride; the dispute commits before it does
			if result, _, err := b.executor.ApplyStripeEvent(ctx, &dispute); err != nil || result != EventApplied {
				t.Errorf("want the dispute applied, got %s, %v", result, err)
			}
			return nil
		}
		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		if err != nil || outcome.StatusCode != 200 {
			t.Fatalf("want the cancel answered 200 with its refund, got %+v, %v", outcome, err)
		}
		if !disputed {
			t.Fatal("want the dispute applied between the claim and the record")
		}
		b.requireStatus(t, ride.ID, models.RideStatusDisputed)
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND stripe_refund_id IS NOT NULL`, ride.ID); n != 1 {
			t.Fatal("want the refund recorded on the disputed ride")
		}
		b.requireRefunds(t, *ride.StripeChargeID, 1)
	})

	t.Run("BookingKeyIsNotACancelKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, testKey)); !errors.Is(err, ErrParamsMismatch) {
			t.Fatalf("want ErrParamsMismatch, got %v", err)
		}
		b.requireRefunds(t, *ride.StripeChargeID, 0)
	})
}

// requireStatus checks a ride's status.
func (b *testBundle) requireStatus(t *testing.T, rideID int64, want models.RideStatus) {
	t.Helper()
	var status models.RideStatus
	if err := b.Pool.QueryRow(context.Background(), `SELECT status FROM rides WHERE id = $1`, rideID).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != want {
		t.Fatalf("want ride %d %s, got %s", rideID, want, status)
	}
}
