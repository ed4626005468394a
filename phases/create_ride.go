package phases

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/rocketrides/rocketrides/models"
)

// CreateRideRequest is one POST /rides, already authenticated and validated.
type CreateRideRequest struct {
	User           *models.User
	IdempotencyKey string
	Params         RideParams
	OriginIP       netip.Addr

	// RaiseError makes the request fail right after ride_created, to demonstrate recovery.
	// Honoured only when Config.SimulateErrors is set; not part of the compared params.
	RaiseError bool

	// ResumeOnly makes the request work only a key that exists (see keyRequest.resumeOnly).
	ResumeOnly bool

	// AdmitNewKey, when set, is asked before the request makes a new key (see
	// keyRequest.admitNewKey).
	AdmitNewKey func() error
}

// CreateRidePath is the request path stored on the key of every ride request.
const CreateRidePath = "/rides"

// CreateRide runs a ride request to its end, or as far as it can get (see runRequest).
func (e *Executor) CreateRide(ctx context.Context, req *CreateRideRequest) (*Outcome, error) {
	if req.RaiseError && !e.config.SimulateErrors {
		return nil, ErrSimulationDisabled
	}
	return e.runRequest(ctx, keyRequest{
		user:           req.User,
		idempotencyKey: req.IdempotencyKey,
		method:         methodPost,
		path:           CreateRidePath,
		originIP:       req.OriginIP,
		params:         req.Params,
		sameParams:     sameParamsAs(req.Params),
		resumeOnly:     req.ResumeOnly,
		admitNewKey:    req.AdmitNewKey,
	}, func(ctx context.Context, r *run) error {
		return e.createRide(ctx, r, req)
	})
}

// createRide is the ride request, as the article's loop: two atomic phases around the one
// foreign state mutation, the Stripe charge. Each atomic phase runs the phases of the recovery
// points it covers, from wherever the key stands, in one SERIALIZABLE transaction that commits
// them with the recovery point reached (atomicPhase); a phase that finishes the request early
// (a declined card) stores its response, and the request ends there.
func (e *Executor) createRide(ctx context.Context, r *run, req *CreateRideRequest) error {
	// Atomic phase 1: find or create the key and lock it (upsertIdempotencyKey), then the local
	// work up to the charge.
	err := e.atomicPhase(ctx, r, func(ctx context.Context, tx *phaseTx, at models.RecoveryPoint) (PhaseAction, error) {
		switch at {
		case models.RecoveryPointStarted:
			return e.createRideRecord(ctx, tx, r, req.Params) // -> ride_created
		case models.RecoveryPointRideCreated:
			return e.prepareCharge(ctx, tx, r) // the charge is next: commit
		}
		return NoOp{}, nil // charge_created: past the charge, atomic phase 2's
	})
	if err != nil || r.replayed {
		return err
	}
	if r.key.RecoveryPoint != models.RecoveryPointFinished {
		// The request holds its key's lease from here on, for as long as it runs.
		defer e.keepLease(ctx, r)()
	}
	e.faultPoint(ctx, FaultPoint(r.key.RecoveryPoint))
	if r.key.RecoveryPoint == models.RecoveryPointFinished {
		return nil
	}

	// The foreign state mutation, with no transaction open: the charge, under the key's own
	// Stripe idempotency key, so that Stripe charges once however often this is retried.
	var answer *chargeAnswer
	if r.key.RecoveryPoint == models.RecoveryPointRideCreated {
		if req.RaiseError {
			return ErrSimulated
		}
		if answer, err = e.sendCharge(ctx, r); err != nil {
			return err
		}
	}

	// Atomic phase 2: the local work after the charge.
	err = e.atomicPhase(ctx, r, func(ctx context.Context, tx *phaseTx, at models.RecoveryPoint) (PhaseAction, error) {
		switch at {
		case models.RecoveryPointRideCreated:
			return e.recordCharge(ctx, tx, r, answer) // -> charge_created, or finished (402)
		case models.RecoveryPointChargeCreated:
			return e.stageReceipt(ctx, tx, r) // -> finished (201)
		}
		return nil, fmt.Errorf("bug: atomic phase 2 at recovery point %q", at)
	})
	if err != nil {
		return err
	}
	e.faultPoint(ctx, FaultPoint(r.key.RecoveryPoint))
	return nil
}
