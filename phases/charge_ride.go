package phases

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
)

// What a ride costs. Every ride is a flat $20.00 while Rocket Rides is young.
const (
	RideAmountCents int64 = 20_00
	RideCurrency          = "usd"
)

// What a charge carries besides the amount: the same for every try of one request. The
// metadata names the request, rider and client key, which a person at Stripe's dashboard can
// find the ride by (rides.stripe_charge_id holds the charge's id).
const (
	chargeDescription            = "Rocket Rides ride"
	StripeMetadataRiderID        = "rider_id"
	StripeMetadataIdempotencyKey = "idempotency_key"
)

// chargeAnswer is what became of a charge that Stripe answered: the charge, or, for a charge
// that no retry can change, the response or review that settles the request.
type chargeAnswer struct {
	charge  *stripe.Charge
	refusal *problem.Problem // Stripe refused the charge for good

	// stuckReason and stuckDetail say why retrying can never settle the charge (see stuckAtStripe).
	stuckReason, stuckDetail string
}

// The phase from ride_created to charge_created is the request's one foreign state mutation, the
// Stripe charge, which no database transaction can roll back. So it is three steps, and no
// transaction or pooled connection is held while Stripe is called:
//
//  1. prepareCharge, the last phase of the atomic phase before the charge, which commits that a
//     charge is about to be attempted (see atomicPhase).
//  2. sendCharge, the charge itself, sent with the key's own Stripe idempotency key, so that
//     however often this step is retried, in this process or another, Stripe charges once.
//  3. recordCharge, the first phase of the atomic phase after it, which stores the outcome:
//     the charge id and recovery point charge_created, or, for a definitive refusal, the
//     stored 402 response.
//
// An indeterminate outcome (timeout, dropped connection, 5xx) stores nothing and returns a
// PaymentUnavailableError: the next try simply asks Stripe again with the same key.

// prepareCharge gets the ride to charge, and refuses to re-send a charge that Stripe may have
// forgotten the idempotency key of.
func (e *Executor) prepareCharge(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	expired, err := e.stripeKeyExpired(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	if expired {
		// Stripe may have forgotten our key, so re-sending could charge a second time.
		return e.needsReview(ctx, tx, r, models.AbandonedReasonStripeKeyExpired,
			"the first charge attempt is older than Stripe's idempotency key memory")
	}
	return ForeignMutationNext{}, nil
}

// stripeKeyExpired reports whether the key's Stripe call was first attempted longer ago than
// Config.StripeKeyMaxAge: Stripe may have forgotten its idempotency key, and re-sending could
// make the call a second time. A call never attempted has not.
func (e *Executor) stripeKeyExpired(ctx context.Context, tx *phaseTx, r *run) (bool, error) {
	if r.key.ForeignMutationAttemptedAt == nil {
		return false, nil
	}
	return models.IdempotencyKeyForeignMutationOlderThan(ctx, tx, r.key.UserID, r.key.ID, e.config.StripeKeyMaxAge)
}

// sendCharge sends the charge and sorts Stripe's answer: an answer the next atomic phase
// records, or an error that leaves the request at ride_created for a retry.
func (e *Executor) sendCharge(ctx context.Context, r *run) (*chargeAnswer, error) {
	start := time.Now()
	charge, chargeErr := e.createCharge(ctx, r.key, r.req.user)
	answer, err := sortChargeAnswer(r.ride.ID, charge, chargeErr)
	call := stripeCall{kind: "charge", took: time.Since(start), err: chargeErr, outcome: string(chargeOutcome(answer, err))}
	if charge != nil {
		call.objectID, call.response = charge.ID, charge.LastResponse
	}
	if answer != nil {
		call.reason = answer.stuckReason
	}
	e.logStripeCall(ctx, r, call)
	if e.hooks.afterCharge != nil {
		e.hooks.afterCharge(ctx)
	}
	if err != nil {
		return nil, err
	}
	if answer.charge != nil {
		e.faultPoint(ctx, FaultPointChargeAnswered)
	}
	return answer, nil
}

// sortChargeAnswer sorts what Stripe made of a charge: a charge, a refusal or a charge stuck
// for good, which the next atomic phase records, or an error, a PaymentUnavailableError when a
// retry may yet succeed.
func sortChargeAnswer(rideID int64, charge *stripe.Charge, err error) (*chargeAnswer, error) {
	if err == nil {
		return &chargeAnswer{charge: charge}, nil
	}
	if refusal := definitiveRefusal(err); refusal != nil {
		return &chargeAnswer{refusal: refusal}, nil
	}
	if reason := stuckAtStripe(err); reason != "" {
		return &chargeAnswer{stuckReason: reason, stuckDetail: err.Error()}, nil
	}
	if isIndeterminate(err) {
		return nil, &PaymentUnavailableError{Err: err}
	}
	return nil, fmt.Errorf("error charging ride %d: %w", rideID, err)
}

// recordCharge stores what Stripe answered.
func (e *Executor) recordCharge(ctx context.Context, tx *phaseTx, r *run, answer *chargeAnswer) (PhaseAction, error) {
	switch {
	case answer == nil:
		return nil, fmt.Errorf("bug: key %d at %s with no charge sent", r.key.ID, models.RecoveryPointRideCreated)
	case answer.refusal != nil:
		// The ride stays, as the record of the attempt, but it is declined, not booked: a
		// listing must not show the rider a ride that will never happen.
		models.RideRaiseStatusByID(&tx.Writes, r.ride.UserID, r.ride.ID, models.RideStatusDeclined) // prepareCharge loaded the ride
		r.ride.Status = r.ride.Status.Raise(models.RideStatusDeclined)
		return Response{Status: statusPaymentRequired, Body: answer.refusal}, nil
	case answer.stuckReason != "":
		return e.needsReview(ctx, tx, r, answer.stuckReason, answer.stuckDetail)
	}
	models.RideSetStripeChargeID(&tx.Writes, r.ride.UserID, r.ride.ID, answer.charge.ID) // prepareCharge loaded the ride
	r.ride.StripeChargeID = &answer.charge.ID
	// A refund or a dispute of the charge may have come before this record of it, and been kept
	// for it (ApplyStripeEvent): applied here, in the same transaction.
	var kept []models.KeptStripeEvent
	models.StripeEventsKeptFor(&tx.Writes, answer.charge.ID, &kept)
	ride := r.ride
	tx.afterWrites(func(batch *pgx.Batch) { applyKeptEvents(batch, ride, kept) })
	return SetRecoveryPoint{Name: models.RecoveryPointChargeCreated}, nil
}

// loadRide reads the request's ride, unless this run created it.
func (e *Executor) loadRide(ctx context.Context, tx *phaseTx, r *run) error {
	if r.ride != nil {
		return nil
	}
	ride, err := models.RideGetByIdempotencyKeyID(ctx, tx, r.key.UserID, r.key.ID)
	if err != nil {
		return fmt.Errorf("bug: no ride for key at %s: %w", r.key.RecoveryPoint, err)
	}
	r.ride = ride
	return nil
}

// needsReview finishes a request whose charge no retry can settle: it records the request in
// abandoned_requests for a person, and stores a 500 that tells the client not to try again with
// a new key (which could charge twice).
func (e *Executor) needsReview(ctx context.Context, tx *phaseTx, r *run, reason, detail string) (PhaseAction, error) {
	return e.recordForReview(ctx, tx, r, reason, detail,
		"We could not confirm whether this ride was charged, and retrying cannot find out. Our team will review it; do not retry it with a new key.")
}

// recordForReview records a request that no retry can settle in abandoned_requests for a
// person, and stores a 500 that tells the client so in answer.
func (e *Executor) recordForReview(ctx context.Context, tx *phaseTx, r *run, reason, detail, answer string) (PhaseAction, error) {
	key, ride := r.key, r.ride
	recorded := *key
	recorded.LastError = &detail
	models.AbandonedRequestQueueFromKey(&tx.Writes, &recorded, reason, &ride.ID)
	e.logger.ErrorContext(ctx, "Phases: Stripe call cannot be settled by retrying; recorded for review",
		slog.Int64("idempotency_key_id", key.ID), slog.Int64("ride_id", ride.ID),
		slog.String("reason", reason), slog.String("detail", detail))
	return Response{Status: statusInternalServerError, Body: problem.New(statusInternalServerError,
		problem.CodePaymentNeedsReview, "Payment needs review", answer)}, nil
}

// createCharge sends the charge to Stripe.
func (e *Executor) createCharge(ctx context.Context, key *models.IdempotencyKey, user *models.User) (*stripe.Charge, error) {
	// Every parameter comes from the request, none from a row the database made for it (the
	// ride's id, say): Stripe replays a key only to the same parameters, and after a restore
	// that lost the first atomic phase, the retry's ride is a new row, but its charge must be
	// the replay of the first (see StripeIdempotencyKey).
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
	return e.stripe.Charges.New(params)
}

// definitiveRefusal returns the problem to store when Stripe refused the charge for good: the
// card was declined, or the request can never succeed as sent (no such customer, say). Retrying
// either would only be refused again, so the request finishes with a 402.
//
// Stripe's own words reach the rider only for a card error: Stripe writes that message, and
// its decline_code, for the card's holder ("Your card has insufficient funds."). Any other
// refusal is about our request, not the card, and its message names our own identifiers ("No
// such customer: 'cus_…'"), so the rider gets fixed text; the full error is in the log line of
// the Stripe call (logStripeCall), with Stripe's request id.
func definitiveRefusal(err error) *problem.Problem {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		return nil
	}
	switch {
	case stripeErr.Type == stripe.ErrorTypeCard:
		p := problem.New(statusPaymentRequired, problem.CodeCardDeclined, "Card declined",
			cmp.Or(stripeErr.Msg, cardDeclinedDetail))
		p.DeclineCode = string(stripeErr.DeclineCode)
		return p
	case stripeErr.Type == stripe.ErrorTypeInvalidRequest && stripeErr.HTTPStatusCode < 500 &&
		stripeErr.HTTPStatusCode != 401 && stripeErr.HTTPStatusCode != 403 &&
		stripeErr.HTTPStatusCode != 409 && stripeErr.HTTPStatusCode != 429:
		return problem.New(statusPaymentRequired, problem.CodePaymentRejected, "Payment rejected", paymentRejectedDetail)
	}
	return nil
}

// The details of the stored 402s where Stripe's message is not passed on: a card error without
// one (Stripe always sends one, but the rider must be told something), and every other refusal.
const (
	cardDeclinedDetail    = "Your card was declined."
	paymentRejectedDetail = "The payment processor refused this charge, and retrying will not change that. Check the card on your account or contact support."
)

// stuckAtStripe names why a failed charge can never be settled by re-sending it with the same
// idempotency key, or returns "" if it can be:
//   - Stripe saved a failure under our key (it does for errors that happen once a request began
//     executing, 500s included) and replays it to every retry;
//   - Stripe refuses our key because it was first used with other parameters.
func stuckAtStripe(err error) string {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		return ""
	}
	switch {
	case stripeErr.Type == stripe.ErrorTypeIdempotency && stripeErr.HTTPStatusCode == 400:
		return models.AbandonedReasonStripeKeyConflict
	case stripeErr.HTTPStatusCode >= 500 && stripeErr.LastResponse != nil &&
		stripeErr.LastResponse.Header.Get("Idempotent-Replayed") == "true":
		return models.AbandonedReasonStripeReplayedError
	}
	return ""
}

// isIndeterminate reports whether a failed charge may be retried with the same idempotency
// key: Stripe was unreachable or overloaded, the answer was lost, another request with our key
// was in flight, or Stripe rejected our own credentials (our misconfiguration, not the rider's
// fault, and fixable by us). Anything else is a bug on our side.
func isIndeterminate(err error) bool {
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		// Timeouts, resets and refused connections reach us as plain Go errors.
		return true
	}
	switch stripeErr.HTTPStatusCode {
	case 401, 403, 409, 429:
		return true
	}
	return stripeErr.HTTPStatusCode >= 500 || stripeErr.HTTPStatusCode == 0
}
