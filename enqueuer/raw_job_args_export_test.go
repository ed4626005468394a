package enqueuer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
)

// RawJobArgs is a River job of any kind with its arguments as JSON, so that the enqueuer's tests
// can stage jobs of made-up kinds without the workers package. DecodeRaw uses it for every job.
type RawJobArgs struct {
	// JobKind is the River kind, the staged job's job_name.
	JobKind string

	// Args are the job's arguments, stored in River as they are.
	Args json.RawMessage
}

// Kind is the job's River kind.
func (a RawJobArgs) Kind() string { return a.JobKind }

// MarshalJSON returns Args, so that River stores the staged arguments unchanged.
func (a RawJobArgs) MarshalJSON() ([]byte, error) {
	if len(a.Args) == 0 {
		return nil, errors.New("raw job args are empty")
	}
	return a.Args, nil
}

// DecodeRaw is a DecodeFunc that hands every staged job to River as it is: kind job_name, the
// staged arguments, River's default insert options. Production wires jobargs.DecodeStagedJob.
func DecodeRaw(jobName string, args json.RawMessage) (river.JobArgs, *river.InsertOpts, error) {
	if jobName == "" {
		return nil, nil, errors.New("job name is empty")
	}
	if !json.Valid(args) {
		return nil, nil, fmt.Errorf("arguments of job %q are not JSON", jobName)
	}
	return RawJobArgs{JobKind: jobName, Args: args}, nil, nil
}
