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

// CreateRide runs a ride request to its end, or as far as it can get (see runRequest): two
// atomic phases around the one foreign state mutation, the Stripe charge. Each atomic phase
// names the phase that leaves each recovery point it covers, and runs them from wherever the
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

		// Atomic phase 1, after the key's upsert: the local work up to the charge.
		beforeMutation: steps{
			models.RecoveryPointStarted:       req.createRideRecord, // -> ride_created
			models.RecoveryPointRideCreated:   e.prepareStripeCall,  // the charge is next: commit
			models.RecoveryPointChargeCreated: passOn,               // past the charge: atomic phase 2's
		},

		// The foreign state mutation, then atomic phase 2: the local work after the charge.
		mutation: chargeMutation,
		send:     e.sendCharge,
		afterMutation: steps{
			models.RecoveryPointRideCreated:   e.recordCharge, // -> charge_created, or finished (402)
			models.RecoveryPointChargeCreated: e.stageReceipt, // -> finished (201)
		},
	})
}

// createRideRecord is the phase from started to ride_created: it inserts the ride and its audit
// record. Nothing outside the database happens here, so it shares the atomic phase of the key's
// upsert and of the charge's preparation.
func (req *CreateRideRequest) createRideRecord(_ context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	keyID, params := r.key.ID, req.Params
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
	err := stageJob(ctx, tx, r, jobargs.SendRideReceipt{RideID: r.ride.ID, UserID: r.key.UserID, Amount: RideAmountCents, Currency: RideCurrency})
	if err != nil {
		return nil, err
	}
	return Response{Status: statusCreated, Body: resource.NewRideCreated(r.ride)}, nil
}
