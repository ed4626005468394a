package phases

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// stageReceipt is the phase from charge_created to finished. Mailing a receipt is a foreign
// state mutation too, but not one the rider has to wait for: the job is staged in staged_jobs
// in this very transaction, and so exists if and only if the request finishes. The enqueuer
// hands it to the job queue once it is committed, woken by runRequest (stagedJobsNotifier).
func (e *Executor) stageReceipt(ctx context.Context, tx *phaseTx, r *run) (PhaseAction, error) {
	if err := e.loadRide(ctx, tx, r); err != nil {
		return nil, err
	}
	if r.ride.StripeChargeID == nil {
		return nil, fmt.Errorf("bug: ride %d has no charge at %s", r.ride.ID, models.RecoveryPointChargeCreated)
	}

	args, err := json.Marshal(jobargs.SendRideReceipt{
		RideID:   r.ride.ID,
		UserID:   r.key.UserID,
		Amount:   RideAmountCents,
		Currency: RideCurrency,
	})
	if err != nil {
		return nil, fmt.Errorf("error encoding receipt job: %w", err)
	}
	models.StagedJobInsert(&tx.Writes, r.key.UserID, jobargs.SendRideReceiptKind, args)
	r.staged = true

	return Response{Status: statusCreated, Body: resource.NewRideCreated(r.ride)}, nil
}
