package jobargs

import (
	"errors"

	"github.com/riverqueue/river"
)

// Receipt is what both receipt jobs carry: the ride, its rider, and the amount the receipt
// states. Rows already stored in staged_jobs and river_job hold this JSON, so its field names and
// encodings do not change.
type Receipt struct {
	// RideID is a string in JSON, as in the API: ids are 63 random bits, more than a
	// JavaScript double holds. It alone decides uniqueness: one job of each kind per ride.
	RideID   int64  `json:"ride_id,string" river:"unique"`
	UserID   int64  `json:"user_id"`
	Amount   int64  `json:"amount"`   // charged or refunded, in the currency's smallest unit, as Stripe counts it
	Currency string `json:"currency"` // ISO 4217, lower case, as Stripe writes it
}

// SendRideReceiptKind is the job that emails a rider the receipt of a charged ride: its job_name
// in staged_jobs and its kind in River.
const SendRideReceiptKind = "send_ride_receipt"

// SendRefundReceiptKind is the job that emails a rider the receipt of a cancelled ride's refund:
// its job_name in staged_jobs and its kind in River.
const SendRefundReceiptKind = "send_refund_receipt"

// SendRideReceiptMaxAttempts is how often a receipt is tried before River discards the job.
// With River's default backoff (attempt⁴ seconds) ten attempts span about four hours: a mail
// server's bad afternoon is ridden out, and past that a person should look at the discarded job
// rather than the rider getting a receipt days late (the worker keeps discarded jobs for that:
// `admin list-failed-jobs` lists them, `admin retry-job` puts one back to work).
const SendRideReceiptMaxAttempts = 10

// SendRideReceipt are the args of the receipt job, as phases stages them at the end of a
// charged ride's last atomic phase. Amount is what was charged.
type SendRideReceipt Receipt

// SendRefundReceipt are the args of the refund receipt job, as phases stages them at the end of a
// cancel's last atomic phase. Amount is what was given back.
type SendRefundReceipt Receipt

// Kind is the job's name in River, the same as in staged_jobs.
func (SendRideReceipt) Kind() string { return SendRideReceiptKind }

// Kind is the job's name in River, the same as in staged_jobs.
func (SendRefundReceipt) Kind() string { return SendRefundReceiptKind }

// InsertOpts makes the job unique per ride (see receiptInsertOpts).
func (SendRideReceipt) InsertOpts() river.InsertOpts { return receiptInsertOpts() }

// InsertOpts makes the job unique per ride (see receiptInsertOpts).
func (SendRefundReceipt) InsertOpts() river.InsertOpts { return receiptInsertOpts() }

// receiptInsertOpts makes a receipt job unique per ride. Inserting it again inserts nothing while
// one for the same ride is available, scheduled, running, retryable or completed (until River
// cleans completed jobs out after a day). A discarded or cancelled job does not block a new one,
// so an operator can re-enqueue a receipt that gave up.
func receiptInsertOpts() river.InsertOpts {
	return river.InsertOpts{
		MaxAttempts: SendRideReceiptMaxAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	}
}

func (a SendRideReceipt) validate() error   { return Receipt(a).validate() }
func (a SendRefundReceipt) validate() error { return Receipt(a).validate() }

func (a Receipt) validate() error {
	switch {
	case a.RideID <= 0:
		return errors.New("ride_id must be positive")
	case a.UserID <= 0:
		return errors.New("user_id must be positive")
	case a.Amount <= 0:
		return errors.New("amount must be positive")
	case len(a.Currency) != 3:
		return errors.New("currency must be a three-letter ISO 4217 code")
	}
	return nil
}
