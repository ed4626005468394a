package enqueuer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/models"
)

// FailedTag tags the River jobs of staged jobs that the enqueuer set aside, so that an operator
// can list them: SELECT * FROM river_job WHERE 'enqueuer_failed' = ANY(tags).
const FailedTag = "enqueuer_failed"

// failure is a staged job that River did not take, and why.
type failure struct {
	stagedJob  *models.StagedJob
	err        error
	riverJobID int64 // once set aside
}

// failureMetadata is what a set-aside job carries in its River metadata.
type failureMetadata struct {
	StagedJobID int64     `json:"staged_job_id"`
	StagedAt    time.Time `json:"staged_at"`
	Error       string    `json:"enqueuer_error"`
}

// setAside records f's staged job in River as a cancelled job, in tx, so that it leaves the
// staging table without being lost or worked. See RunOnce for why.
func (e *Enqueuer) setAside(ctx context.Context, tx pgx.Tx, f *failure) error {
	metadata, err := json.Marshal(failureMetadata{
		StagedJobID: f.stagedJob.ID,
		StagedAt:    f.stagedJob.CreatedAt,
		Error:       f.err.Error(),
	})
	if err != nil {
		return fmt.Errorf("error encoding metadata of staged job %d: %w", f.stagedJob.ID, err)
	}
	res, err := e.riverClient.InsertTx(ctx, tx, RawJobArgs{JobKind: f.stagedJob.JobName, Args: f.stagedJob.JobArgs},
		&river.InsertOpts{Metadata: metadata, Tags: []string{FailedTag}})
	if err != nil {
		return fmt.Errorf("error setting aside staged job %d: %w", f.stagedJob.ID, err)
	}
	// Cancelled before anyone can see it: the transaction has not committed.
	if _, err := e.riverClient.JobCancelTx(ctx, tx, res.Job.ID); err != nil {
		return fmt.Errorf("error cancelling set-aside job %d: %w", res.Job.ID, err)
	}
	f.riverJobID = res.Job.ID
	return nil
}
