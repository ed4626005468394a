package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// StagedJobLockBatch locks up to limit staged jobs, oldest first, for the caller's transaction,
// which hands them over and deletes them before it commits. SKIP LOCKED lets several enqueuers
// drain at once: each takes rows that no other has locked instead of queueing behind another's
// batch, so no job is taken twice and none waits for a stuck enqueuer.
func StagedJobLockBatch(ctx context.Context, db DBTX, limit int) ([]*StagedJob, error) {
	rows, err := db.Query(ctx, `
		SELECT id, created_at, job_name, job_args
		FROM staged_jobs
		ORDER BY id
		LIMIT $1
		FOR UPDATE SKIP LOCKED`, limit)
	if err != nil {
		return nil, fmt.Errorf("error locking staged jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*StagedJob, error) {
		var j StagedJob
		err := row.Scan(&j.ID, &j.CreatedAt, &j.JobName, &j.JobArgs)
		return &j, err
	})
	if err != nil {
		return nil, fmt.Errorf("error locking staged jobs: %w", err)
	}
	return jobs, nil
}

// StagedJobDeleteByIDs deletes the staged jobs with exactly these ids and returns how many it
// deleted. It deletes by id and never by a bound such as the largest id handed over (the bug of
// the article's original enqueuer): ids are taken when a row is inserted, not when it commits,
// so a row below the bound may have committed after the batch was read, or be locked by another
// enqueuer, and deleting it would lose its job.
func StagedJobDeleteByIDs(ctx context.Context, db DBTX, ids []int64) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM staged_jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return 0, fmt.Errorf("error deleting staged jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}
