package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
)

// SendRideReceiptWorker emails the receipt of a charged ride and records it on the ride, in the
// transaction that completes the job, so that a job finding its receipt recorded sends nothing.
// Sending stays at least once, as mail and Postgres share no transaction; the package doc says
// where the window lies and how Work keeps it short (receiptSender.send does the work).
type SendRideReceiptWorker struct {
	river.WorkerDefaults[jobargs.SendRideReceipt]
	receiptSender[jobargs.SendRideReceipt]
}

// Work sends the receipt unless it was recorded already. An SMTP failure is returned, so River
// retries with backoff; a job that cannot ever succeed (its ride is gone or was never charged)
// is cancelled instead.
func (w *SendRideReceiptWorker) Work(ctx context.Context, job *river.Job[jobargs.SendRideReceipt]) error {
	return w.send(ctx, job)
}

// rideReceipt is the receipt of a charged ride, recorded in rides.receipt_sent_at.
var rideReceipt = receiptKind[jobargs.SendRideReceipt]{
	name:    "receipt",
	ride:    rideReceiptRide,
	message: receiptMessage,
	record:  models.RideReceiptRecord,
}

// rideReceiptRide is rideReceipt's ride: the job's, charged.
func rideReceiptRide(ctx context.Context, db models.DBTX, args jobargs.SendRideReceipt) (*models.Ride, *models.RideReceipt, error) {
	ride, err := models.RideGetByIDForUser(ctx, db, args.RideID, args.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil, river.JobCancel(fmt.Errorf("no ride %d of user %d to send a receipt for: %w", args.RideID, args.UserID, err))
	}
	if err != nil {
		return nil, nil, err
	}
	if ride.StripeChargeID == nil {
		return nil, nil, river.JobCancel(fmt.Errorf("ride %d was never charged, so it has no receipt", ride.ID))
	}
	recorded, err := models.RideReceiptGet(ctx, db, ride.ID)
	if errors.Is(err, models.ErrNotFound) {
		return ride, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return ride, recorded, nil
}
