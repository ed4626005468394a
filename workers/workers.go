// Package workers holds the River workers of Rocket Rides: the background jobs that the API
// stages in staged_jobs and the enqueuer hands to River. One file per job kind, each with its
// args (the job's JSON and insert options) and its worker.
package workers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/mail"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/phases"
)

// Deps is what the workers need from the process that runs them.
type Deps struct {
	Pool   *pgxpool.Pool
	Mailer mailer.Mailer

	// MailFrom is the From address of receipts. Its domain is also the domain of their
	// Message-IDs. Default MailFromDefault.
	MailFrom string

	Logger *slog.Logger

	// Metrics counts the receipts the workers send. Default: a set that no registry holds.
	Metrics *metrics.Worker
}

// MailFromDefault is the receipts' From address when Deps.MailFrom does not say: a domain
// reserved for examples, as no real one is Rocket Rides'.
const MailFromDefault = "Rocket Rides <receipts@rocketrides.example>"

// Register adds every worker of this package to workers.
func Register(workers *river.Workers, deps Deps) error {
	if deps.Pool == nil || deps.Mailer == nil || deps.Logger == nil {
		return errors.New("workers need a pool, a mailer and a logger")
	}
	deps.MailFrom = cmp.Or(deps.MailFrom, MailFromDefault)
	from, err := mail.ParseAddress(deps.MailFrom)
	if err != nil {
		return fmt.Errorf("error parsing MAIL_FROM %q: %w", deps.MailFrom, err)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.NewWorker(nil)
	}
	receipts := &SendRideReceiptWorker{
		pool:            deps.Pool,
		mailer:          deps.Mailer,
		mailFrom:        from.String(),
		messageIDDomain: from.Address[strings.LastIndexByte(from.Address, '@')+1:],
		logger:          deps.Logger,
		handedOver:      deps.Metrics.Receipts.WithLabelValues(handedOverResult(deps.Mailer)),
		latency:         deps.Metrics.ReceiptLatency,
	}
	if err := river.AddWorkerSafely(workers, receipts); err != nil {
		return fmt.Errorf("error registering the receipt worker: %w", err)
	}
	return nil
}

// ErrUnknownJobName is returned by DecodeStagedJob for a job name no worker here handles. The
// enqueuer does not meet it in practice: it takes only the rows of StagedJobNames, which reads
// the same table as DecodeStagedJob, and leaves a job staged by a newer release where it is.
var ErrUnknownJobName = errors.New("unknown job name")

// stagedJobDecoders decode the args of each job name that the API stages and this package has a
// worker for, one entry per job kind. StagedJobNames and DecodeStagedJob both read it, so that
// the enqueuer never takes a staged job that DecodeStagedJob does not know.
var stagedJobDecoders = map[string]func(args json.RawMessage) (river.JobArgs, *river.InsertOpts, error){
	phases.ReceiptJobName: decodeSendRideReceipt,
}

// StagedJobNames are the staged job names DecodeStagedJob knows, sorted, for
// enqueuer.Config.JobNames.
func StagedJobNames() []string {
	return slices.Sorted(maps.Keys(stagedJobDecoders))
}

// DecodeStagedJob turns a row of staged_jobs into the typed args River inserts, with the insert
// options of the job kind (uniqueness, attempts), so that the enqueuer can hand any staged job
// to River without knowing the kinds. Args that fail to decode or validate are an error.
func DecodeStagedJob(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
	decode, ok := stagedJobDecoders[jobName]
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownJobName, jobName)
	}
	return decode(args)
}
