package phases

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// CancelRideRequest is one POST /rides/{id}/cancel, already authenticated.
type CancelRideRequest struct {
	User           *models.User
	IdempotencyKey string
	RideID         int64
	OriginIP       netip.Addr

	// ResumeOnly makes the request work only a key that exists (see keyRequest.resumeOnly).
	ResumeOnly bool

	// AdmitNewKey, when set, is asked before the request makes a new key (see
	// keyRequest.admitNewKey).
	AdmitNewKey func() error
}

// CancelRideParams are the parameters of a cancel, as stored on its key and compared against
// every retry: the ride, which the path names too.
type CancelRideParams struct {
	RideID int64 `json:"ride_id,string"`
}

// CancelRidePath is the request path stored on the key of a cancel of ride id.
func CancelRidePath(id int64) string {
	return "/rides/" + strconv.FormatInt(id, 10) + "/cancel"
}

// CancelRide runs a cancel to its end, or as far as it can get (see runRequest).
func (e *Executor) CancelRide(ctx context.Context, req *CancelRideRequest) (*Outcome, error) {
	params := CancelRideParams{RideID: req.RideID}
	return e.runRequest(ctx, keyRequest{
		user:           req.User,
		idempotencyKey: req.IdempotencyKey,
		method:         methodPost,
		path:           CancelRidePath(req.RideID),
		originIP:       req.OriginIP,
		params:         params,
		sameParams:     sameParamsAs(params),
		resumeOnly:     req.ResumeOnly,
		admitNewKey:    req.AdmitNewKey,
	}, func(ctx context.Context, r *run) error {
		return e.cancelRide(ctx, r, req.RideID)
	})
}

// ErrRideBookingInProgress: the ride to cancel is still being booked, its charge not settled
// yet. Not stored: the rider retries the cancel with the same key once the booking finished.
var ErrRideBookingInProgress = errors.New("the ride's booking has not finished")

// cancelRide is the cancel request, the second request graph on the same machinery as
// createRide, with its own recovery points:
//
//	started        -> refund_created (the foreign state mutation, a Stripe refund)
//	refund_created -> finished       (the audit record, the staged refund receipt, the 200)
//
// Atomic phase 1 claims the ride for this cancel, or answers why it cannot be cancelled (404,
// 409); the refund goes out with no transaction open, under the key's own Stripe idempotency
// key; atomic phase 2 records it and finishes.
func (e *Executor) cancelRide(ctx context.Context, r *run, rideID int64) error {
	// Atomic phase 1: find or create the key and lock it, then claim the ride.
	err := e.atomicPhase(ctx, r, func(ctx context.Context, tx *phaseTx, at models.RecoveryPoint) (PhaseAction, error) {
		if at == models.RecoveryPointStarted {
			return e.claimRideForCancel(ctx, tx, r, rideID) // the refund is next: commit
		}
		return NoOp{}, nil // refund_created: past the refund, atomic phase 2's
	})
	if err != nil || r.replayed {
		return err
	}
	if r.key.RecoveryPoint != models.RecoveryPointFinished {
		defer e.keepLease(ctx, r)()
	}
	if r.key.RecoveryPoint == models.RecoveryPointStarted {
		e.faultPoint(ctx, FaultPointCancelClaimed)
	}
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		return nil
	}

	// The foreign state mutation: the refund, under the key's own Stripe idempotency key.
	var answer *refundAnswer
	if r.key.RecoveryPoint == models.RecoveryPointStarted {
		if answer, err = e.sendRefund(ctx, r); err != nil {
			return err
		}
	}

	// Atomic phase 2: the local work after the refund.
	err = e.atomicPhase(ctx, r, func(ctx context.Context, tx *phaseTx, at models.RecoveryPoint) (PhaseAction, error) {
		switch at {
		case models.RecoveryPointStarted:
			return e.recordRefund(ctx, tx, r, rideID, answer) // -> refund_created, or finished (409, 500)
		case models.RecoveryPointRefundCreated:
			return e.finishCancel(ctx, tx, r, rideID) // -> finished (200)
		}
		return nil, fmt.Errorf("bug: cancel's atomic phase 2 at recovery point %q", at)
	})
	if err != nil {
		return err
	}
	e.faultPoint(ctx, FaultPoint(r.key.RecoveryPoint))
	return nil
}

// claimRideForCancel is the cancel's first phase: it finds the rider's ride and claims it for
// this request, so that no other cancel refunds it, or finishes the request with the reason it
// cannot be cancelled. Run again by a retry, it finds its own claim and goes on.
func (e *Executor) claimRideForCancel(ctx context.Context, tx *phaseTx, r *run, rideID int64) (PhaseAction, error) {
	ride, err := models.RideGetByIDForUser(ctx, tx, rideID, r.key.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return Response{Status: statusNotFound, Body: problem.New(statusNotFound, problem.CodeNotFound,
			"Not found", "No such ride.")}, nil
	}
	if err != nil {
		return nil, err
	}
	r.ride = ride

	ours := ride.CancelIdempotencyKeyID != nil && *ride.CancelIdempotencyKeyID == r.key.ID
	switch {
	case ours:
		// An earlier run of this request claimed it.
	case ride.Status == models.RideStatusDisputed:
		return cannotCancel(problem.CodeRideDisputed, "Ride disputed",
			"Your bank disputes this ride's charge; the dispute settles it, not a cancel."), nil
	case ride.Status == models.RideStatusRefunded:
		return cannotCancel(problem.CodeRideAlreadyRefunded, "Ride already refunded",
			"This ride's charge was refunded already."), nil
	case ride.Status == models.RideStatusCancelled || ride.CancelIdempotencyKeyID != nil:
		return cannotCancel(problem.CodeRideAlreadyCancelled, "Ride already cancelled",
			"This ride was cancelled by another request."), nil
	case ride.Status == models.RideStatusDeclined:
		return rideNotCharged(), nil
	case ride.StripeChargeID == nil:
		return e.uncharged(ctx, tx, r, ride)
	default:
		models.RideClaimForCancel(&tx.Writes, ride.UserID, ride.ID, r.key.ID)
	}

	expired, err := e.stripeKeyExpired(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	if expired {
		return e.refundNeedsReview(ctx, tx, r, models.AbandonedReasonStripeKeyExpired,
			"the first refund attempt is older than Stripe's idempotency key memory")
	}
	return ForeignMutationNext{}, nil
}

// uncharged answers a cancel of a ride whose charge was never recorded, as its booking says: a
// declined card (a stored 402) was never charged, so there is nothing to refund; a booking still
// under way is to be waited for (not stored); and one that ended otherwise (sent to review, or
// reaped unfinished) may have charged the rider without anyone knowing, which a person must find
// out before anything can be refunded.
func (e *Executor) uncharged(ctx context.Context, tx *phaseTx, r *run, ride *models.Ride) (PhaseAction, error) {
	var (
		point models.RecoveryPoint
		code  *int
		err   = models.ErrNotFound
	)
	if ride.IdempotencyKeyID != nil {
		point, code, err = models.IdempotencyKeyOutcome(ctx, tx, ride.UserID, *ride.IdempotencyKeyID)
	}
	switch {
	case err != nil && !errors.Is(err, models.ErrNotFound):
		return nil, err
	case err == nil && point != models.RecoveryPointFinished:
		return nil, ErrRideBookingInProgress
	case err == nil && code != nil && *code == statusPaymentRequired:
		return rideNotCharged(), nil // declined by a release before rides had a status for it
	}
	return e.refundNeedsReview(ctx, tx, r, models.AbandonedReasonChargeUnknown,
		"the ride's booking ended without a recorded charge, and not with a declined card")
}

// rideNotCharged answers a cancel of a declined ride: it was never charged.
func rideNotCharged() Response {
	return cannotCancel(problem.CodeRideNotCharged, "Ride not charged",
		"This ride was never charged, so there is nothing to refund.")
}

// cannotCancel finishes a cancel with a 409 that every retry of it is answered with.
func cannotCancel(code problem.Code, title, detail string) Response {
	return Response{Status: statusConflict, Body: problem.New(statusConflict, code, title, detail)}
}

// refundAnswer is what became of a refund that Stripe answered: the refund, or the response or
// review that settles the request without one.
type refundAnswer struct {
	refund  *stripe.Refund
	refusal Response // Stripe will never make this refund: the charge was refunded or disputed

	// raiseTo is the ride status Stripe's refusal tells us of.
	raiseTo models.RideStatus

	// stuckReason and stuckDetail say why retrying can never settle the refund.
	stuckReason, stuckDetail string
}

// sendRefund refunds what is left of the ride's charge (all of it, unless part was refunded at
// Stripe's dashboard) and sorts Stripe's answer: an answer the next atomic phase records, or an
// error that leaves the request at started for a retry.
func (e *Executor) sendRefund(ctx context.Context, r *run) (*refundAnswer, error) {
	start := time.Now()
	params := &stripe.RefundParams{
		Charge: r.ride.StripeChargeID,
		Reason: stripe.String(string(stripe.RefundReasonRequestedByCustomer)),
	}
	params.AddMetadata(StripeMetadataRiderID, strconv.FormatInt(r.key.UserID, 10))
	params.AddMetadata(StripeMetadataIdempotencyKey, r.key.IdempotencyKey)
	params.SetIdempotencyKey(r.key.StripeIdempotencyKey)
	params.Context = ctx
	refund, refundErr := e.stripe.Refunds.New(params)

	answer, err := sortRefundAnswer(r.ride.ID, refund, refundErr)
	call := stripeCall{kind: "refund", took: time.Since(start), err: refundErr, outcome: refundOutcome(answer, err)}
	if refund != nil {
		call.objectID, call.response = refund.ID, refund.LastResponse
	}
	if answer != nil {
		call.reason = answer.stuckReason
	}
	e.logStripeCall(ctx, r, call)
	if err != nil {
		return nil, err
	}
	if answer.refund != nil {
		e.faultPoint(ctx, FaultPointRefundAnswered)
	}
	return answer, nil
}

// The Stripe error codes of a refund that can never be made.
const (
	stripeCodeChargeAlreadyRefunded = "charge_already_refunded"
	stripeCodeChargeDisputed        = "charge_disputed"
)

// sortRefundAnswer sorts what Stripe made of a refund, as sortChargeAnswer does a charge's.
func sortRefundAnswer(rideID int64, refund *stripe.Refund, err error) (*refundAnswer, error) {
	if err == nil {
		return &refundAnswer{refund: refund}, nil
	}
	var stripeErr *stripe.Error
	if errors.As(err, &stripeErr) && stripeErr.Type == stripe.ErrorTypeInvalidRequest {
		switch stripeErr.Code {
		case stripeCodeChargeAlreadyRefunded:
			// Someone refunded the charge at Stripe's dashboard before this cancel got there: not
			// this request's refund (Stripe would have replayed that one under our key).
			return &refundAnswer{raiseTo: models.RideStatusRefunded, refusal: cannotCancel(problem.CodeRideAlreadyRefunded,
				"Ride already refunded", "This ride's charge was refunded already.")}, nil
		case stripeCodeChargeDisputed:
			return &refundAnswer{raiseTo: models.RideStatusDisputed, refusal: cannotCancel(problem.CodeRideDisputed,
				"Ride disputed", "Your bank disputes this ride's charge; the dispute settles it, not a cancel.")}, nil
		}
	}
	if reason := stuckAtStripe(err); reason != "" {
		return &refundAnswer{stuckReason: reason, stuckDetail: err.Error()}, nil
	}
	if definitiveRefusal(err) != nil {
		// A refund refused for a reason of ours, not the rider's: a person must see to it.
		return &refundAnswer{stuckReason: models.AbandonedReasonStripeRefundRefused, stuckDetail: err.Error()}, nil
	}
	if isIndeterminate(err) {
		return nil, &PaymentUnavailableError{Err: err}
	}
	return nil, fmt.Errorf("error refunding ride %d: %w", rideID, err)
}

// RefundOutcome values name what became of a refund in its log line.
const (
	RefundRefunded    = "refunded"
	RefundRefused     = "refused" // the charge was refunded or disputed already
	RefundNeedsReview = string(ChargeNeedsReview)
	RefundUnavailable = string(ChargeUnavailable)
	RefundError       = string(ChargeError)
)

// refundOutcome names what sortRefundAnswer made of a refund.
func refundOutcome(answer *refundAnswer, err error) string {
	var unavailable *PaymentUnavailableError
	switch {
	case errors.As(err, &unavailable):
		return RefundUnavailable
	case err != nil:
		return RefundError
	case answer.stuckReason != "":
		return RefundNeedsReview
	case answer.refund == nil:
		return RefundRefused
	}
	return RefundRefunded
}

// recordRefund stores what Stripe answered: the refund and recovery point refund_created, or
// the stored 409 of a refund Stripe will never make, or a request for review.
func (e *Executor) recordRefund(ctx context.Context, tx *phaseTx, r *run, rideID int64, answer *refundAnswer) (PhaseAction, error) {
	// Read afresh: a webhook may have changed the ride since the claim.
	r.ride = nil
	if err := e.loadCancelledRide(ctx, tx, r, rideID); err != nil {
		return nil, err
	}
	switch {
	case answer == nil:
		return nil, fmt.Errorf("bug: key %d at %s with no refund sent", r.key.ID, models.RecoveryPointStarted)
	case answer.stuckReason != "":
		return e.refundNeedsReview(ctx, tx, r, answer.stuckReason, answer.stuckDetail)
	case answer.refund == nil:
		models.RideRaiseStatusByID(&tx.Writes, r.ride.UserID, r.ride.ID, answer.raiseTo)
		return answer.refusal, nil
	}
	models.RideRecordRefund(&tx.Writes, r.ride.UserID, r.ride.ID, answer.refund.ID, answer.refund.Amount)
	r.ride.StripeRefundID = &answer.refund.ID
	r.ride.StripeRefundAmount = &answer.refund.Amount
	r.ride.Status = r.ride.Status.Raise(models.RideStatusCancelled)
	return SetRecoveryPoint{Name: models.RecoveryPointRefundCreated}, nil
}

// refundNeedsReview finishes a cancel whose refund no retry can settle, as needsReview does a
// ride whose charge none can.
func (e *Executor) refundNeedsReview(ctx context.Context, tx *phaseTx, r *run, reason, detail string) (PhaseAction, error) {
	return e.recordForReview(ctx, tx, r, reason, detail,
		"We could not confirm whether this ride was refunded, and retrying cannot find out. Our team will review it.")
}

// finishCancel is the phase from refund_created to finished: the audit record, the refund
// receipt staged for the worker, and the 200 with the cancelled ride.
func (e *Executor) finishCancel(ctx context.Context, tx *phaseTx, r *run, rideID int64) (PhaseAction, error) {
	if err := e.loadCancelledRide(ctx, tx, r, rideID); err != nil {
		return nil, err
	}
	if r.ride.StripeRefundID == nil {
		return nil, fmt.Errorf("bug: ride %d has no refund at %s", r.ride.ID, models.RecoveryPointRefundCreated)
	}
	models.AuditRecordInsert(&tx.Writes, models.AuditRecordInsertParams{
		ID:           models.NewID(),
		Action:       models.AuditActionRideCancelled,
		Data:         r.key.RequestParams,
		OriginIP:     r.req.originIP,
		ResourceID:   r.ride.ID,
		ResourceType: "ride",
		UserID:       r.key.UserID,
	})
	// What the refund gave back: the rest of the charge, less than the fare if part of it was
	// refunded at Stripe's dashboard first.
	amount := RideAmountCents
	if r.ride.StripeRefundAmount != nil {
		amount = *r.ride.StripeRefundAmount
	}
	args, err := json.Marshal(jobargs.SendRefundReceipt{
		RideID:   r.ride.ID,
		UserID:   r.key.UserID,
		Amount:   amount,
		Currency: RideCurrency,
	})
	if err != nil {
		return nil, fmt.Errorf("error encoding refund receipt job: %w", err)
	}
	models.StagedJobInsert(&tx.Writes, r.key.UserID, jobargs.SendRefundReceiptKind, args)
	r.staged = true
	return Response{Status: statusOK, Body: resource.NewRideCancelled(r.ride)}, nil
}

// loadCancelledRide reads the ride the cancel names, unless this run read it already.
func (e *Executor) loadCancelledRide(ctx context.Context, tx *phaseTx, r *run, rideID int64) error {
	if r.ride != nil {
		return nil
	}
	ride, err := models.RideGetByIDForUser(ctx, tx, rideID, r.key.UserID)
	if err != nil {
		return fmt.Errorf("bug: no ride for cancel key %d: %w", r.key.ID, err)
	}
	r.ride = ride
	return nil
}
