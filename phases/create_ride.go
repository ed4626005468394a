package phases

import (
	"context"
	"fmt"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// CreateRideRequest is one POST /rides, already authenticated and validated.
type CreateRideRequest struct {
	KeyedRequest
	Params RideParams

	// RaiseError makes the request fail right after ride_created, to demonstrate recovery.
	// Honoured only when Config.SimulateErrors is set; not part of the compared params.
	RaiseError bool
}

// RideParams are the parameters of a ride request, as stored on its key and compared against
// every retry. They are parsed numbers, not the client's strings, so "0" and "0.0" match.
type RideParams struct {
	OriginLat float64 `json:"origin_lat"`
	OriginLon float64 `json:"origin_lon"`
	TargetLat float64 `json:"target_lat"`
	TargetLon float64 `json:"target_lon"`
}

// CreateRidePath is the request path stored on the key of every ride request.
const CreateRidePath = "/rides"

// CreateRide runs a ride request to its end, or as far as it can get (see runRequest). It is
// the article's loop: two atomic phases around the one foreign state mutation, the Stripe
// charge. Each atomic phase runs a switch over the recovery points it covers, from wherever the
// key stands, in one SERIALIZABLE transaction that commits them with the point reached.
func (e *Executor) CreateRide(ctx context.Context, req *CreateRideRequest) (*Outcome, error) {
	if req.RaiseError && !e.config.SimulateErrors {
		return nil, ErrSimulationDisabled
	}
	return e.runRequest(ctx, request{
		KeyedRequest: req.KeyedRequest,
		path:         CreateRidePath,
		params:       req.Params,
		sameParams:   sameParamsAs(req.Params),
		raiseError:   req.RaiseError,

		findRide: func(ctx context.Context, db models.DBTX, key *models.IdempotencyKey) (*models.Ride, error) {
			return models.RideGetByIdempotencyKeyID(ctx, db, key.UserID, key.ID)
		},

		// Atomic phase 1: after the key's upsert, the local work up to the charge.
		beforeMutation: func(ctx context.Context, tx *phaseTx, r *run, at models.RecoveryPoint) (PhaseAction, error) {
			switch at {
			case models.RecoveryPointStarted:
				return e.createRideRecord(tx, r, req.Params) // -> ride_created
			case models.RecoveryPointRideCreated:
				return e.prepareStripeCall(ctx, tx, r) // the charge is next: commit
			}
			return NoOp{}, nil // charge_created: past the charge, atomic phase 2's
		},

		// The foreign state mutation, with no transaction open.
		mutation: chargeMutation,
		send:     e.sendCharge,

		// Atomic phase 2: the local work after the charge.
		afterMutation: func(ctx context.Context, tx *phaseTx, r *run, at models.RecoveryPoint) (PhaseAction, error) {
			switch at {
			case models.RecoveryPointRideCreated:
				return e.recordCharge(ctx, tx, r) // -> charge_created, or finished (402)
			case models.RecoveryPointChargeCreated:
				return e.stageReceipt(ctx, tx, r) // -> finished (201)
			}
			return nil, fmt.Errorf("bug: a ride's atomic phase 2 at recovery point %q", at)
		},
	})
}

// createRideRecord is the phase from started to ride_created: it inserts the ride and its audit
// record. Nothing outside the database happens here, so it shares the atomic phase of the key's
// upsert and of the charge's preparation.
func (e *Executor) createRideRecord(tx *phaseTx, r *run, params RideParams) (PhaseAction, error) {
	keyID := r.key.ID
	r.ride = &models.Ride{
		ID:               models.NewID(),
		IdempotencyKeyID: &keyID,
		OriginLat:        params.OriginLat,
		OriginLon:        params.OriginLon,
		TargetLat:        params.TargetLat,
		TargetLon:        params.TargetLon,
		UserID:           r.key.UserID,
	}
	models.RideInsert(&tx.Writes, r.ride)
	auditRide(tx, r, models.AuditActionRideCreated)
	return SetRecoveryPoint{Name: models.RecoveryPointRideCreated}, nil
}

// stageReceipt is the phase from charge_created to finished. Mailing a receipt is a foreign
// state mutation too, but not one the rider has to wait for: the job is staged in staged_jobs
// in this very transaction, and so exists if and only if the request finishes.
func (e *Executor) stageReceipt(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	if r.ride.StripeChargeID == nil {
		return nil, fmt.Errorf("bug: ride %d has no charge at %s", r.ride.ID, models.RecoveryPointChargeCreated)
	}
	err := stageJob(tx, r, jobargs.SendRideReceipt{RideID: r.ride.ID, UserID: r.key.UserID, Amount: RideAmountCents, Currency: RideCurrency})
	if err != nil {
		return nil, err
	}
	return Response{Status: statusCreated, Body: resource.NewRideCreated(r.ride)}, nil
}
