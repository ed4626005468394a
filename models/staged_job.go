package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// StagedJob is a background job waiting for its transaction to commit. Workers never see this
// table; the enqueuer moves committed rows into the job queue.
type StagedJob struct {
	ID        int64
	CreatedAt time.Time
	JobName   string
	JobArgs   json.RawMessage
}

// StagedJobInsert stages a job in the caller's transaction, so that it exists if and only if
// that transaction commits.
func StagedJobInsert(ctx context.Context, db DBTX, name string, args json.RawMessage) (*StagedJob, error) {
	var j StagedJob
	err := db.QueryRow(ctx, `
		INSERT INTO staged_jobs (job_name, job_args)
		VALUES ($1, $2)
		RETURNING id, created_at, job_name, job_args`, name, args).
		Scan(&j.ID, &j.CreatedAt, &j.JobName, &j.JobArgs)
	if err != nil {
		return nil, fmt.Errorf("error staging job %q: %w", name, err)
	}
	return &j, nil
}
