package phases

import (
	"context"
	"errors"
	"strconv"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
)

// The phase from started to refund_created is the cancel's one foreign state mutation, the
// Stripe refund. It takes the charge's three steps (see charge_ride.go): prepareStripeCall
// commits that a refund is about to be attempted, sendRefund sends it under the key's own
// Stripe idempotency key with no transaction open, and recordRefund stores what Stripe
// answered.
var refundMutation = foreignMutation{
	name: "refund", from: models.RecoveryPointStarted,
	next: FaultPointCancelClaimed, answered: FaultPointRefundAnswered,
	unsure: "We could not confirm whether this ride was refunded, and retrying cannot find out. Our team will review it.",
}

// sendRefund sends the refund, as sendCharge does the charge, and sorts Stripe's answer.
func (e *Executor) sendRefund(ctx context.Context, r *run) *stripeAnswer {
	refund := &stripeMade{}
	err := e.stripe.Refunds.B.Call(methodPost, "/v1/refunds", e.stripe.Refunds.Key, refundParams(ctx, r.key, r.ride), refund)
	return sortRefundAnswer(r.ride.ID, refund, err)
}

// refundParams is the refund of what is left of ride's charge: all of it, unless part was
// refunded at Stripe's dashboard.
func refundParams(ctx context.Context, key *models.IdempotencyKey, ride *models.Ride) *stripe.RefundParams {
	params := &stripe.RefundParams{
		Charge: ride.StripeChargeID,
		Reason: stripe.String(string(stripe.RefundReasonRequestedByCustomer)),
	}
	params.AddMetadata(StripeMetadataRiderID, strconv.FormatInt(key.UserID, 10))
	params.AddMetadata(StripeMetadataIdempotencyKey, key.IdempotencyKey)
	params.SetIdempotencyKey(key.StripeIdempotencyKey)
	params.Context = ctx
	return params
}

// The Stripe error codes of a refund that can never be made.
const (
	stripeCodeChargeAlreadyRefunded = "charge_already_refunded"
	stripeCodeChargeDisputed        = "charge_disputed"
)

// sortRefundAnswer sorts what Stripe made of a refund, as sortChargeAnswer does a charge's.
func sortRefundAnswer(rideID int64, refund *stripeMade, err error) *stripeAnswer {
	if err == nil {
		return &stripeAnswer{outcome: StripeRefunded, made: refund}
	}
	var stripeErr *stripe.Error
	if errors.As(err, &stripeErr) && stripeErr.Type == stripe.ErrorTypeInvalidRequest {
		switch stripeErr.Code {
		case stripeCodeChargeAlreadyRefunded:
			// Someone refunded the charge at Stripe's dashboard before this cancel got there.
			// It is not this request's refund: Stripe would have replayed that one under our key.
			return &stripeAnswer{outcome: StripeRefused, stripeErr: err, raiseTo: models.RideStatusRefunded, refusal: errRideAlreadyRefunded()}
		case stripeCodeChargeDisputed:
			return &stripeAnswer{outcome: StripeRefused, stripeErr: err, raiseTo: models.RideStatusDisputed, refusal: errRideDisputed()}
		}
	}
	if definitiveRefusal(err) != nil {
		// Stripe refused the refund for a reason of ours, not the rider's: a person must see
		// to it.
		return &stripeAnswer{outcome: StripeNeedsReview, stripeErr: err,
			stuckReason: models.AbandonedReasonStripeRefundRefused, stuckDetail: err.Error()}
	}
	return sortFailure(err, "refunding", rideID)
}

// errRideAlreadyRefunded and errRideDisputed answer a cancel of a ride whose charge was
// refunded or disputed already, whether the ride said so or Stripe did.
func errRideAlreadyRefunded() *Response {
	return cannotCancel(problem.CodeRideAlreadyRefunded, "Ride already refunded", "This ride's charge was refunded already.")
}

func errRideDisputed() *Response {
	return cannotCancel(problem.CodeRideDisputed, "Ride disputed",
		"Your bank disputes this ride's charge; the dispute settles it, not a cancel.")
}

// recordRefund stores what Stripe answered: the refund and recovery point refund_created, the
// stored 409 of a refund Stripe will never make, or a request for review.
func (e *Executor) recordRefund(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	// Read afresh: a webhook may have changed the ride since the claim.
	r.ride = nil
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	if action, err := e.recordFailedCall(ctx, tx, r); action != nil || err != nil {
		return action, err
	}
	refund := r.answer.made
	models.RideRecordRefund(&tx.Writes, r.ride.UserID, r.ride.ID, refund.ID, refund.Amount)
	r.ride.StripeRefundID = &refund.ID
	r.ride.StripeRefundAmount = &refund.Amount
	r.ride.Status = r.ride.Status.Raise(models.RideStatusCancelled)
	return SetRecoveryPoint{Name: models.RecoveryPointRefundCreated}, nil
}
