package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/models"
)

// SendRefundReceiptWorker emails the receipt of a cancelled ride's refund and records it on the
// ride, in the transaction that completes the job, exactly as SendRideReceiptWorker does for the
// ride's receipt: a job finding the refund receipt recorded sends nothing, and sending is at
// least once, normally exactly once (see the package doc).
type SendRefundReceiptWorker struct {
	river.WorkerDefaults[jobargs.SendRefundReceipt]
	receiptSender[jobargs.SendRefundReceipt]
}

// Work sends the refund receipt unless it was recorded already. An SMTP failure is returned, so
// River retries with backoff; a job that cannot ever succeed (its ride is gone, or has no refund
// recorded) is cancelled instead.
func (w *SendRefundReceiptWorker) Work(ctx context.Context, job *river.Job[jobargs.SendRefundReceipt]) error {
	return w.send(ctx, job)
}

// refundReceipt is the receipt of the refund our cancel made, recorded in
// rides.refund_receipt_sent_at.
var refundReceipt = receiptKind[jobargs.SendRefundReceipt]{
	name:    "refund receipt",
	ride:    refundReceiptRide,
	message: refundReceiptMessage,
	record:  models.RideRefundReceiptRecord,
}

// refundReceiptRide is refundReceipt's ride: the job's, refunded. The receipt it returns as
// recorded has no MessageID, as the ride does not carry it.
func refundReceiptRide(ctx context.Context, db models.DBTX, args jobargs.SendRefundReceipt) (*models.Ride, *models.RideReceipt, error) {
	ride, err := models.RideGetByIDForUser(ctx, db, args.RideID, args.UserID)
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil, river.JobCancel(fmt.Errorf("no ride %d of user %d to send a refund receipt for: %w", args.RideID, args.UserID, err))
	}
	if err != nil {
		return nil, nil, err
	}
	if ride.StripeRefundID == nil {
		return nil, nil, river.JobCancel(fmt.Errorf("ride %d has no refund recorded, so it has no refund receipt", ride.ID))
	}
	if ride.RefundReceiptSentAt != nil {
		return ride, &models.RideReceipt{RideID: ride.ID, SentAt: *ride.RefundReceiptSentAt}, nil
	}
	return ride, nil, nil
}
