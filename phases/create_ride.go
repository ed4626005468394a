package phases

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/rocketrides/rocketrides/models"
)

// CreateRide runs a ride request to its end, or as far as it can get. It resumes from the key's
// recovery point when the key exists, and returns the stored response when the key finished
// before. On an error the key is unlocked at its last recovery point, so that a retry (the
// client's or the completer's) resumes from there.
func (e *Executor) CreateRide(ctx context.Context, req *CreateRideRequest) (*Outcome, error) {
	if req.RaiseError && !e.config.SimulateErrors {
		return nil, ErrSimulationDisabled
	}

	ctx, cancel := context.WithTimeout(ctx, e.config.RequestTimeout)
	defer cancel()
	r := &run{req: req, mu: &sync.Mutex{}}
	if err := e.createRide(ctx, r); err != nil {
		e.unlockAfterError(ctx, r, err)
		return nil, err
	}

	// Postgres hands jsonb back in its own layout; compacting it keeps what clients see small
	// and identical between the first answer and every replay.
	var body bytes.Buffer
	if err := json.Compact(&body, r.key.ResponseBody); err != nil {
		return nil, fmt.Errorf("error compacting stored response: %w", err)
	}
	return &Outcome{StatusCode: *r.key.ResponseCode, Body: body.Bytes(), Replayed: r.replayed}, nil
}

// createRide is the ride request, as the article's loop: two atomic phases around the one
// foreign state mutation, the Stripe charge. Each atomic phase runs the phases of the recovery
// points it covers, from wherever the key stands, in one SERIALIZABLE transaction that commits
// them with the recovery point reached (atomicPhase); a phase that finishes the request early
// (a declined card) stores its response, and the request ends there.
func (e *Executor) createRide(ctx context.Context, r *run) error {
	// Atomic phase 1: find or create the key and lock it (upsertIdempotencyKey), then the local
	// work up to the charge.
	err := e.atomicPhase(ctx, r, func(ctx context.Context, tx *phaseTx, at models.RecoveryPoint) (PhaseAction, error) {
		switch at {
		case models.RecoveryPointStarted:
			return e.createRideRecord(ctx, tx, r) // -> ride_created
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
		if r.req.RaiseError {
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
