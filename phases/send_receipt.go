package phases

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
)

// ReceiptJobName is the job that emails a rider the receipt for a charged ride.
const ReceiptJobName = "send_ride_receipt"

// ReceiptJobArgs are the staged receipt job's arguments. The worker that sends receipts
// decodes exactly this JSON.
type ReceiptJobArgs struct {
	RideID   int64  `json:"ride_id,string"` // a string, as in the API: ids are 63 random bits
	UserID   int64  `json:"user_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// sendReceipt is the atomic phase from charge_created to finished. Mailing a receipt is a
// foreign state mutation too, but not one the rider has to wait for: the job is staged in
// staged_jobs in this very transaction, and so exists if and only if the request finishes. The
// enqueuer hands it to the job queue once it is committed.
func (e *Executor) sendReceipt(ctx context.Context, key *models.IdempotencyKey, req *CreateRideRequest) error {
	return e.atomicPhase(ctx, key, func(ctx context.Context, tx pgx.Tx, key *models.IdempotencyKey) (PhaseAction, error) {
		ride, err := models.RideGetByIdempotencyKeyID(ctx, tx, key.ID)
		if err != nil {
			return nil, fmt.Errorf("bug: no ride for key at %s: %w", models.RecoveryPointChargeCreated, err)
		}
		if ride.StripeChargeID == nil {
			return nil, fmt.Errorf("bug: ride %d has no charge at %s", ride.ID, models.RecoveryPointChargeCreated)
		}

		args, err := json.Marshal(ReceiptJobArgs{
			RideID:   ride.ID,
			UserID:   key.UserID,
			Amount:   RideAmountCents,
			Currency: RideCurrency,
		})
		if err != nil {
			return nil, fmt.Errorf("error encoding receipt job: %w", err)
		}
		if _, err := models.StagedJobInsert(ctx, tx, ReceiptJobName, args); err != nil {
			return nil, err
		}

		return Response{Status: statusCreated, Body: NewRideCreatedBody(ride)}, nil
	})
}
