package phases

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/models"
)

// What a ride costs. Every ride is a flat $20.00 while Rocket Rides is young.
const (
	RideAmountCents int64 = 20_00
	RideCurrency          = "usd"
)

// What a charge or a refund carries besides the amount: the same for every try of one request.
// The metadata names the rider and the client's key, which a person at Stripe's dashboard can
// find the ride by (rides.stripe_charge_id holds the charge's id).
const (
	chargeDescription            = "Rocket Rides ride"
	StripeMetadataRiderID        = "rider_id"
	StripeMetadataIdempotencyKey = "idempotency_key"
)

// The phase from ride_created to charge_created is the ride's one foreign state mutation, the
// Stripe charge, which no database transaction can roll back. So it is three steps, and no
// transaction or pooled connection is held while Stripe is called:
//
//  1. prepareStripeCall, the last phase of the atomic phase before the charge, which commits
//     that a charge is about to be attempted (see atomicPhase).
//  2. sendCharge, the charge itself, sent with the key's own Stripe idempotency key, so that
//     however often this step is retried, in this process or another, Stripe charges once.
//  3. recordCharge, the first phase of the atomic phase after it, which stores the outcome:
//     the charge id and recovery point charge_created, or, for a definitive refusal, the
//     stored 402 response.
//
// An indeterminate outcome (timeout, dropped connection, 5xx) stores nothing and returns a
// PaymentUnavailableError: the next try simply asks Stripe again with the same key.
var chargeMutation = foreignMutation{
	name: "charge", from: models.RecoveryPointRideCreated,
	next: FaultPointRideCreated, answered: FaultPointChargeAnswered,
	unsure: "We could not confirm whether this ride was charged, and retrying cannot find out. Our team will review it; do not retry it with a new key.",
}

// sendCharge sends the charge, as stripe-go's Charges.New does but decoding the answer once (see
// stripeMade), and sorts Stripe's answer.
func (e *Executor) sendCharge(ctx context.Context, r *run) *stripeAnswer {
	charge := &stripeMade{}
	err := e.stripe.Charges.B.Call(methodPost, "/v1/charges", e.stripe.Charges.Key, chargeParams(ctx, r.key, r.req.User), charge)
	return sortChargeAnswer(r.ride.ID, charge, err)
}

// chargeParams is the charge of key's ride, to user's card. Every parameter comes from the
// request, none from a row the database made for it (the ride's id, say). Stripe replays a key
// only to the same parameters. After a restore that lost atomic phase 1, the retry's ride is a
// new row, but its charge must be the replay of the first (see StripeIdempotencyKey).
func chargeParams(ctx context.Context, key *models.IdempotencyKey, user *models.User) *stripe.ChargeParams {
	params := &stripe.ChargeParams{
		Amount:      stripe.Int64(RideAmountCents),
		Currency:    stripe.String(RideCurrency),
		Customer:    stripe.String(user.StripeCustomerID),
		Description: stripe.String(chargeDescription),
	}
	params.AddMetadata(StripeMetadataRiderID, strconv.FormatInt(user.ID, 10))
	params.AddMetadata(StripeMetadataIdempotencyKey, key.IdempotencyKey)
	params.SetIdempotencyKey(key.StripeIdempotencyKey)
	params.Context = ctx
	return params
}

// sortChargeAnswer sorts what Stripe made of a charge: a charge, a refusal for good, or a charge
// stuck for good, which the next atomic phase records; or a failure, a PaymentUnavailableError
// when a retry may yet succeed.
func sortChargeAnswer(rideID int64, charge *stripeMade, err error) *stripeAnswer {
	if err == nil {
		return &stripeAnswer{outcome: StripeCharged, made: charge}
	}
	if refusal := definitiveRefusal(err); refusal != nil {
		// The ride stays, as the record of the attempt, but declined: a listing must not show
		// the rider a ride that will never happen.
		return &stripeAnswer{outcome: StripeOutcome(refusal.Code), stripeErr: err, raiseTo: models.RideStatusDeclined,
			refusal: &Response{Status: statusPaymentRequired, Body: refusal}}
	}
	return sortFailure(err, "charging", rideID)
}

// recordCharge stores what Stripe answered: the charge and recovery point charge_created, the
// stored 402 of a refused charge, or a request for review.
func (e *Executor) recordCharge(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if action, err := e.recordFailedCall(ctx, tx, r); action != nil || err != nil {
		return action, err
	}
	charge := r.answer.made
	models.RideSetStripeChargeID(&tx.Writes, r.ride.UserID, r.ride.ID, charge.ID)
	r.ride.StripeChargeID = &charge.ID
	// A refund or a dispute of the charge may have come before this record of it. Such events
	// are kept for the charge (ApplyStripeEvent) and applied here, in the same transaction.
	var kept []models.KeptStripeEvent
	models.StripeEventsKeptFor(&tx.Writes, charge.ID, &kept)
	ride := r.ride
	tx.afterWrites(func(batch *pgx.Batch) { applyKeptEvents(batch, ride, kept) })
	return SetRecoveryPoint{Name: models.RecoveryPointChargeCreated}, nil
}

// applyKeptEvents queues on batch the application of the events kept for ride's charge: the
// ride moves to the status of highest precedence among them, judged in SQL against the status it
// has by then, and each names the ride from now on. It queues nothing when none was kept. It
// leaves ride as it is: the attempt may fail at its COMMIT, and the retry must queue the raise
// again.
func applyKeptEvents(batch *pgx.Batch, ride *models.Ride, kept []models.KeptStripeEvent) {
	if len(kept) == 0 {
		return
	}
	status := models.RideStatusBooked
	ids := make([]string, len(kept))
	for i, event := range kept {
		status = status.Raise(event.Status)
		ids[i] = event.ID
	}
	models.RideRaiseStatusByID(batch, ride.UserID, ride.ID, status)
	models.StripeEventsSetRide(batch, ids, ride.ID)
}
