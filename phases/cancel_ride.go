package phases

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// CancelRideRequest is one POST /rides/{id}/cancel, already authenticated.
type CancelRideRequest struct {
	KeyedRequest
	RideID int64
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

// isCancelRidePath reports whether path is the path of a cancel.
func isCancelRidePath(path string) bool {
	id, ok := strings.CutPrefix(path, "/rides/")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, "/cancel")
	return ok && id != ""
}

// CancelRide runs a cancel to its end, or as far as it can get (see runRequest). It is the
// second request on the same machinery as CreateRide, with its own recovery points:
//
//	started        -> refund_created (the foreign state mutation, a Stripe refund)
//	refund_created -> finished       (the audit record, the staged refund receipt, the 200)
//
// Atomic phase 1 claims the ride for this cancel, or answers why it cannot be cancelled (404,
// 409). The refund goes out with no transaction open, under the key's own Stripe idempotency
// key. Atomic phase 2 records it and finishes.
func (e *Executor) CancelRide(ctx context.Context, req *CancelRideRequest) (*Outcome, error) {
	params := CancelRideParams{RideID: req.RideID}
	return e.runRequest(ctx, request{
		KeyedRequest: req.KeyedRequest,
		path:         CancelRidePath(req.RideID),
		params:       params,
		sameParams:   sameParamsAs(params),

		findRide: func(ctx context.Context, db models.DBTX, key *models.IdempotencyKey) (*models.Ride, error) {
			return models.RideGetByIDForUser(ctx, db, req.RideID, key.UserID)
		},

		// The ride is claimed after the key's upsert; the refund follows, then its record.
		beforeMutation: steps{
			models.RecoveryPointStarted:       e.claimRide, // the refund is next: commit
			models.RecoveryPointRefundCreated: passOn,      // past the refund: atomic phase 2's
		},
		mutation: refundMutation,
		send:     e.sendRefund,
		afterMutation: steps{
			models.RecoveryPointStarted:       e.recordRefund,       // -> refund_created, or finished (409, 500)
			models.RecoveryPointRefundCreated: e.stageRefundReceipt, // -> finished (200)
		},
	})
}

// ErrRideBookingInProgress: the ride to cancel is still being booked, its charge not settled
// yet. Not stored: the rider retries the cancel with the same key once the booking finished.
var ErrRideBookingInProgress = errors.New("the ride's booking has not finished")

// claimRide is the cancel's first phase. It finds the rider's ride and claims it for this
// request, so that no other cancel refunds it; or it finishes the request with the reason the
// ride cannot be cancelled. A retry finds its own claim and goes on.
func (e *Executor) claimRide(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	ride, err := r.req.findRide(ctx, tx, r.key)
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
		return errRideDisputed(), nil
	case ride.Status == models.RideStatusRefunded:
		return errRideAlreadyRefunded(), nil
	case ride.Status == models.RideStatusCancelled || ride.CancelIdempotencyKeyID != nil:
		return cannotCancel(problem.CodeRideAlreadyCancelled, "Ride already cancelled",
			"This ride was cancelled by another request."), nil
	case ride.Status == models.RideStatusDeclined:
		return errRideNotCharged(), nil
	case ride.StripeChargeID == nil:
		return e.uncharged(ctx, tx, r, ride)
	default:
		models.RideClaimForCancel(&tx.Writes, ride.UserID, ride.ID, r.key.ID)
	}
	return e.prepareStripeCall(ctx, tx, r)
}

// uncharged answers a cancel of a ride whose charge was never recorded, as its booking ended:
//   - a declined card (a stored 402) was never charged, so there is nothing to refund;
//   - a booking still under way is to be waited for (not stored);
//   - a booking that ended otherwise (sent to review, or reaped unfinished) may have charged
//     the rider without anyone knowing, and a person must find out before any refund.
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
		return errRideNotCharged(), nil // declined by a release before rides had a status for it
	}
	return e.needsReview(ctx, tx, r, models.AbandonedReasonChargeUnknown,
		"the ride's booking ended without a recorded charge, and not with a declined card")
}

// errRideNotCharged answers a cancel of a declined ride: it was never charged.
func errRideNotCharged() *Response {
	return cannotCancel(problem.CodeRideNotCharged, "Ride not charged",
		"This ride was never charged, so there is nothing to refund.")
}

// cannotCancel finishes a cancel with a 409 that every retry of it is answered with.
func cannotCancel(code problem.Code, title, detail string) *Response {
	return &Response{Status: statusConflict, Body: problem.New(statusConflict, code, title, detail)}
}

// stageRefundReceipt is the phase from refund_created to finished: the audit record, the
// refund receipt staged for the worker, and the 200 with the cancelled ride.
func (e *Executor) stageRefundReceipt(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	if r.ride.StripeRefundID == nil {
		return nil, fmt.Errorf("bug: ride %d has no refund at %s", r.ride.ID, models.RecoveryPointRefundCreated)
	}
	auditRide(tx, r, models.AuditActionRideCancelled)
	// What the refund gave back: the rest of the charge, less than the fare if part of it was
	// refunded at Stripe's dashboard first.
	amount := RideAmountCents
	if r.ride.StripeRefundAmount != nil {
		amount = *r.ride.StripeRefundAmount
	}
	err := stageJob(ctx, tx, r, jobargs.SendRefundReceipt{RideID: r.ride.ID, UserID: r.key.UserID, Amount: amount, Currency: RideCurrency})
	if err != nil {
		return nil, err
	}
	return Response{Status: statusOK, Body: resource.NewRideCancelled(r.ride)}, nil
}
