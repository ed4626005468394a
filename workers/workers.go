// Package workers holds the River workers of Rocket Rides: the background jobs that the API
// stages in staged_jobs and the enqueuer hands to River. One file per job kind, each with its
// args (the job's JSON and insert options) and its worker.
package workers

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/phases"
)

// Deps is what the workers need from the process that runs them.
type Deps struct {
	Pool   *pgxpool.Pool
	Mailer mailer.Mailer

	// MailFrom is the From address of receipts, as in "Rocket Rides
	// <receipts@rocketrides.example>". Its domain is also the domain of their Message-IDs.
	MailFrom string

	Logger *slog.Logger
}

// Register adds every worker of this package to workers.
func Register(workers *river.Workers, deps Deps) error {
	if deps.Pool == nil || deps.Mailer == nil || deps.Logger == nil {
		return errors.New("workers need a pool, a mailer and a logger")
	}
	from, err := mail.ParseAddress(deps.MailFrom)
	if err != nil {
		return fmt.Errorf("error parsing MAIL_FROM %q: %w", deps.MailFrom, err)
	}
	receipts := &SendRideReceiptWorker{
		pool:            deps.Pool,
		mailer:          deps.Mailer,
		mailFrom:        from.String(),
		messageIDDomain: from.Address[strings.LastIndexByte(from.Address, '@')+1:],
		logger:          deps.Logger,
	}
	if err := river.AddWorkerSafely(workers, receipts); err != nil {
		return fmt.Errorf("error registering the receipt worker: %w", err)
	}
	return nil
}

// ErrUnknownJobName is returned by DecodeStagedJob for a job name no worker here handles, so
// that the enqueuer can tell a job staged by a newer release from a broken one.
var ErrUnknownJobName = errors.New("unknown job name")

// DecodeStagedJob turns a row of staged_jobs into the typed args River inserts, with the insert
// options of the job kind (uniqueness, attempts), so that the enqueuer can hand any staged job
// to River without knowing the kinds. Args that fail to decode or validate are an error.
func DecodeStagedJob(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
	switch jobName {
	case phases.ReceiptJobName:
		var staged phases.ReceiptJobArgs
		if err := json.Unmarshal(args, &staged); err != nil {
			return nil, nil, fmt.Errorf("error decoding %s args: %w", jobName, err)
		}
		// A conversion, not a copy field by field: should the staged args gain a field, this
		// stops compiling until SendRideReceiptArgs has it too.
		receipt := SendRideReceiptArgs(staged)
		if err := receipt.validate(); err != nil {
			return nil, nil, fmt.Errorf("invalid %s args %s: %w", jobName, args, err)
		}
		opts := receipt.InsertOpts()
		return receipt, &opts, nil
	default:
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownJobName, jobName)
	}
}
