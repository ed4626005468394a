package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/models"
)

// listFailedJobsLimitMax is the most jobs of each source list-failed-jobs reads: River's
// JobList takes no more in one call.
const listFailedJobsLimitMax = 10_000

// listFailedJobs shows the background work that failed for good and waits for a person, newest
// failure first: River jobs discarded after their last attempt or cancelled by their worker (a
// receipt for an address no mail server takes; the worker keeps both kinds until a person acts)
// and staged jobs the enqueuer set aside. Each comes with its errors, and with the id that
// retry-job takes. A table by default, for reading; -json prints one object per line, with the
// job's args and every error, for jq and scripts.
func listFailedJobs(ctx context.Context, args []string) error {
	f, err := parseListFlags("list-failed-jobs", args, listFailedJobsLimitMax, "the most recently failed")
	if err != nil {
		return err
	}

	pool, client, err := openRiver(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	discarded, err := client.JobList(ctx, river.NewJobListParams().
		States(rivertype.JobStateDiscarded, rivertype.JobStateCancelled).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderDesc).
		First(f.limit))
	if err != nil {
		return fmt.Errorf("error listing discarded and cancelled River jobs: %w", err)
	}
	staged, err := models.StagedJobListFailed(ctx, pool, f.limit)
	if err != nil {
		return err
	}

	jobs := make([]*failedJob, 0, len(discarded.Jobs)+len(staged))
	for _, j := range discarded.Jobs {
		jobs = append(jobs, failedRiverJob(j))
	}
	for _, j := range staged {
		jobs = append(jobs, failedStagedJob(j))
	}
	slices.SortStableFunc(jobs, func(a, b *failedJob) int { return b.FailedAt.Compare(a.FailedAt) })
	jobs = jobs[:min(len(jobs), f.limit)]

	return failedJobsFormat.write(os.Stdout, jobs, f.asJSON)
}

var failedJobsFormat = listFormat[*failedJob]{
	noun:   "failed job",
	id:     func(j *failedJob) any { return j.ID },
	header: []string{"ID", "STATE", "KIND", "FAILED", "ATTEMPTS", "LAST ERROR"},
	cells:  failedJobCells,
	object: func(j *failedJob) any { return j },
}

// failedJob is how list-failed-jobs shows one failed job, of either source.
type failedJob struct {
	// ID is what retry-job takes: river:ID or staged:ID.
	ID     string `json:"id"`
	Source string `json:"source"`

	// State is River's (discarded, cancelled), or "failed" for a staged job.
	State string `json:"state"`

	// Kind is the River job's kind, or the staged job's name: the same for the same job.
	Kind      string          `json:"kind"`
	Args      json.RawMessage `json:"args"`
	CreatedAt time.Time       `json:"created_at"`

	// FailedAt is when River discarded the job, or the enqueuer set it aside.
	FailedAt time.Time `json:"failed_at"`

	// Attempt and MaxAttempts are River's counts; a staged job has none.
	Attempt     int `json:"attempt,omitempty"`
	MaxAttempts int `json:"max_attempts,omitempty"`

	// Errors are River's, one per failed attempt, oldest first; a staged job has the one error
	// the enqueuer recorded. LastError is the last of them.
	Errors    []failedJobError `json:"errors"`
	LastError string           `json:"last_error"`
}

type failedJobError struct {
	At      time.Time `json:"at"`
	Attempt int       `json:"attempt,omitempty"`
	Error   string    `json:"error"`
	Trace   string    `json:"trace,omitempty"` // a panic's stack trace
}

func failedRiverJob(j *rivertype.JobRow) *failedJob {
	f := &failedJob{
		ID:          failedJobID{source: sourceRiver, id: j.ID}.String(),
		Source:      sourceRiver,
		State:       string(j.State),
		Kind:        j.Kind,
		Args:        j.EncodedArgs,
		CreatedAt:   j.CreatedAt.UTC(),
		Attempt:     j.Attempt,
		MaxAttempts: j.MaxAttempts,
		Errors:      make([]failedJobError, 0, len(j.Errors)),
	}
	if j.FinalizedAt != nil {
		f.FailedAt = j.FinalizedAt.UTC()
	}
	for _, e := range j.Errors {
		f.Errors = append(f.Errors, failedJobError{At: e.At.UTC(), Attempt: e.Attempt, Error: e.Error, Trace: e.Trace})
	}
	if len(j.Errors) > 0 {
		f.LastError = j.Errors[len(j.Errors)-1].Error
	}
	return f
}

func failedStagedJob(j *models.StagedJob) *failedJob {
	f := &failedJob{
		ID:        failedJobID{source: sourceStaged, id: j.ID}.String(),
		Source:    sourceStaged,
		State:     "failed",
		Kind:      j.JobName,
		Args:      j.JobArgs,
		CreatedAt: j.CreatedAt.UTC(),
		FailedAt:  j.FailedAt.UTC(), // StagedJobListFailed returns failed jobs alone
		LastError: *j.LastError,     // set whenever FailedAt is (migration 00005)
	}
	f.Errors = []failedJobError{{At: f.FailedAt, Error: f.LastError}}
	return f
}

func failedJobCells(j *failedJob) []string {
	attempts := "-"
	if j.Source == sourceRiver {
		attempts = fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts)
	}
	// The error is the last cell and is not cut: what went wrong is usually at its end
	// ("...: 554 Relay access denied").
	return []string{j.ID, j.State, j.Kind, j.FailedAt.Format(time.RFC3339), attempts, cmp.Or(oneLine(j.LastError), "-")}
}
