package jobargs

import (
	"github.com/riverqueue/river"
)

// SendRefundReceiptKind is the job that emails a rider the receipt of a cancelled ride's refund:
// its job_name in staged_jobs and its kind in River.
const SendRefundReceiptKind = "send_refund_receipt"

// SendRefundReceipt are the args of the refund receipt job, as phases stages them at the end of
// a cancel's last atomic phase. The same fields as the ride receipt's, for the refund: the
// amount given back.
type SendRefundReceipt struct {
	// RideID alone decides uniqueness: one refund receipt job per ride.
	RideID   int64  `json:"ride_id,string" river:"unique"`
	UserID   int64  `json:"user_id"`
	Amount   int64  `json:"amount"`   // refunded, in the currency's smallest unit
	Currency string `json:"currency"` // ISO 4217, lower case
}

// Kind is the job's name in River, the same as in staged_jobs.
func (SendRefundReceipt) Kind() string { return SendRefundReceiptKind }

// InsertOpts makes the job unique per ride, with the ride receipt's attempts, for its reasons.
func (SendRefundReceipt) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: SendRideReceiptMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	}
}

func (a SendRefundReceipt) validate() error {
	return SendRideReceipt(a).validate()
}
