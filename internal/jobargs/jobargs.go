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
