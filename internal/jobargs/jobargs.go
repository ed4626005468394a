// Package jobargs holds the arguments of Rocket Rides' background jobs: their JSON, their River
// kind and insert options, the decoding of a staged row into them, and the time a job was staged,
// which it carries into River in its metadata.
//
// It is a leaf, importing only River and the standard library, because three packages that must
// not import each other share each job's one type: phases stages the job in the API's
// transaction, the enqueuer moves it into River, and workers run it. A field added here is
// staged, enqueued and read alike.
package jobargs

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river"
)

// ErrUnknownJobName is returned by DecodeStagedJob for a job name this release has no args for.
// The enqueuer does not meet it in practice: it takes only the rows of StagedJobNames, and leaves
// a job staged by a newer release where it is.
var ErrUnknownJobName = errors.New("unknown job name")

// stagedJobDecoders decode the args of each job name the API stages, one entry per job kind.
// StagedJobNames and DecodeStagedJob both read it, so that the enqueuer never takes a staged job
// that DecodeStagedJob does not know. package workers registers a worker for each.
var stagedJobDecoders = map[string]func(args json.RawMessage) (river.JobArgs, *river.InsertOpts, error){
	SendRideReceiptKind:   decode[SendRideReceipt],
	SendRefundReceiptKind: decode[SendRefundReceipt],
}

// StagedJobNames are the staged job names DecodeStagedJob knows, sorted, for
// enqueuer.Config.JobNames.
func StagedJobNames() []string {
	return slices.Sorted(maps.Keys(stagedJobDecoders))
}

// DecodeStagedJob turns a row of staged_jobs into the typed args River inserts, with the insert
// options of the job kind (uniqueness, attempts), so that the enqueuer can hand any staged job
// to River without knowing the kinds (it is the enqueuer's DecodeFunc). Args that fail to decode
// or validate are an error.
func DecodeStagedJob(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
	decode, ok := stagedJobDecoders[jobName]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownJobName, jobName)
	}
	return decode(args)
}

// validatedArgs are the args of a job kind that can be staged.
type validatedArgs interface {
	river.JobArgs
	river.JobArgsWithInsertOpts
	validate() error
}

func decode[T validatedArgs](raw json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
	var args T
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, nil, fmt.Errorf("error decoding %s args: %w", args.Kind(), err)
	}
	if err := args.validate(); err != nil {
		return nil, nil, fmt.Errorf("invalid %s args %s: %w", args.Kind(), raw, err)
	}
	opts := args.InsertOpts()
	return args, &opts, nil
}

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

// StagedAtKey is the key of a River job's metadata that says when the job was staged: the start
// of the transaction that staged it (staged_jobs.created_at). For a receipt that is the ride's
// last atomic phase, moments before the rider's 201. The enqueuer writes it as it hands the job
// to River, since it deletes the staged row then. The worker reads it to time a receipt from the
// booking to the mail server (rocketrides_receipt_latency_seconds). River keeps metadata as the
// inserter wrote it and reserves no key of this prefix.
const StagedAtKey = "rocketrides_staged_at"

// AddStagedAt returns metadata, a JSON object (or empty, meaning {}), with StagedAtKey set to
// stagedAt.
func AddStagedAt(metadata []byte, stagedAt time.Time) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return nil, fmt.Errorf("error decoding job metadata: %w", err)
		}
	}
	value, err := json.Marshal(stagedAt.UTC())
	if err != nil {
		return nil, fmt.Errorf("error encoding staged time: %w", err)
	}
	fields[StagedAtKey] = value
	return json.Marshal(fields) // cannot fail: every value is JSON that was just decoded or encoded
}

// StagedAt returns the time AddStagedAt wrote into metadata. It returns false when there is
// none: a job inserted by something other than the enqueuer.
func StagedAt(metadata []byte) (time.Time, bool) {
	var fields map[string]json.RawMessage
	var stagedAt time.Time
	// A missing key leaves the second Unmarshal no input, which is an error too.
	if json.Unmarshal(metadata, &fields) != nil || json.Unmarshal(fields[StagedAtKey], &stagedAt) != nil {
		return time.Time{}, false
	}
	return stagedAt, true
}
