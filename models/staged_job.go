package models

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StagedJob is a background job staged in the transaction that wants it. Workers never see this
// table: the enqueuer moves committed rows into River's job queue. Rows the queue would not take
// stay here, marked failed.
type StagedJob struct {
	ID        int64
	CreatedAt time.Time
	JobName   string
	JobArgs   json.RawMessage

	// UserID is the rider the job is for; 0 for a job staged before staged jobs named their
	// rider (migrations/00012_rider_first.sql).
	UserID int64

	// TraceContext is the W3C trace context of the request that staged the job, as the global
	// propagator wrote it (traceparent, tracestate), for the enqueuer to continue the trace; nil
	// when tracing was off.
	TraceContext map[string]string

	// FailedAt and LastError say when and why the enqueuer set the job aside (StagedJobMarkFailed);
	// nil while the job waits to be enqueued.
	FailedAt  *time.Time
	LastError *string
}

// StagedJobsChannel is the channel that wakes the enqueuer. StagedJobsNotify notifies it once
// staged jobs are committed, and the enqueuer listens on it.
const StagedJobsChannel = "staged_jobs"

// StagedJobsNotify wakes every enqueuer listening on StagedJobsChannel. A caller sends it after
// the transaction that staged jobs committed, never inside it: a transaction that notifies takes
// a database-wide lock while it commits, which would serialize every ride's last commit.
func StagedJobsNotify(ctx context.Context, db DBTX) error {
	if _, err := db.Exec(ctx, `SELECT pg_notify($1, '')`, StagedJobsChannel); err != nil {
		return fmt.Errorf("error waking the enqueuer: %w", err)
	}
	return nil
}

// StagedJobInsert queues on batch the staging of a job for rider userID, in the caller's
// transaction, so that the job exists if and only if that transaction commits. The rider's id
// puts the row beside the rider's other rows (on Citus, on the same worker). traceContext, the
// W3C trace context of the request, is stored when there is one. Without one, the statement has
// no fourth parameter, not even a NULL: that would take a ride's last batch past the 1 KB that
// pgx keeps as its write buffer, and cost every ride a larger one (BenchmarkCreateRide: 2.5 KB).
func StagedJobInsert(batch *pgx.Batch, userID int64, name string, args json.RawMessage, traceContext map[string]string) {
	if len(traceContext) == 0 {
		batch.Queue(`
			INSERT INTO staged_jobs (job_name, job_args, user_id)
			VALUES ($1, $2, $3)`, name, args, userID,
		).Exec(func(pgconn.CommandTag) error { return nil })
		return
	}
	batch.Queue(`
		INSERT INTO staged_jobs (job_name, job_args, user_id, trace_context)
		VALUES ($1, $2, $3, $4)`, name, args, userID, traceContext,
	).Exec(func(pgconn.CommandTag) error { return nil })
}

// StagedJobLockBatch locks up to limit staged jobs, oldest first, until the caller's
// transaction ends; the caller hands them over and deletes them (or marks them failed) before it
// commits. SKIP LOCKED lets several enqueuers drain at once: each takes rows no other has
// locked, instead of waiting behind another's batch. So no job is taken twice, and none waits
// for a stuck enqueuer.
//
// It takes only jobs named in jobNames, and none that failed. A job staged by a newer release,
// which the caller has no worker for, stays staged until a release that knows it runs. So
// neither such a job nor a failed one can fill the batch and hold up the jobs behind it.
func StagedJobLockBatch(ctx context.Context, db DBTX, jobNames []string, limit int) ([]*StagedJob, error) {
	rows, _ := db.Query(ctx, `
		SELECT id, created_at, job_name, job_args, coalesce(user_id, 0), trace_context
		FROM staged_jobs
		WHERE failed_at IS NULL AND job_name = ANY($1)
		ORDER BY id
		LIMIT $2
		FOR UPDATE SKIP LOCKED`, jobNames, limit)
	jobs, err := pgx.CollectRows(rows, scanStagedJob)
	if err != nil {
		return nil, fmt.Errorf("error locking staged jobs: %w", err)
	}
	return jobs, nil
}

// StagedJobLockByRider locks staged jobs as StagedJobLockBatch does, on a database where
// staged_jobs is distributed by rider (Citus, see Distributed). Citus refuses a FOR UPDATE that
// spans shards, so this reads the oldest candidates without a lock first. Then it locks each
// rider's candidates with a statement that Citus sends to the rider's shard, all in one round
// trip. It skips a candidate another enqueuer took meanwhile, as SKIP LOCKED does.
func StagedJobLockByRider(ctx context.Context, tx pgx.Tx, jobNames []string, limit int) ([]*StagedJob, error) {
	rows, _ := tx.Query(ctx, `
		SELECT user_id, id
		FROM staged_jobs
		WHERE failed_at IS NULL AND job_name = ANY($1)
		ORDER BY id
		LIMIT $2`, jobNames, limit)
	riders, byRider, err := groupByRider(rows)
	if err != nil {
		return nil, fmt.Errorf("error finding staged jobs: %w", err)
	}
	batch := &pgx.Batch{}
	var jobs []*StagedJob
	for _, rider := range riders {
		batch.Queue(`
			SELECT id, created_at, job_name, job_args, coalesce(user_id, 0), trace_context
			FROM staged_jobs
			WHERE user_id = $1 AND id = ANY($2) AND failed_at IS NULL
			FOR UPDATE SKIP LOCKED`, rider, byRider[rider],
		).Query(func(rows pgx.Rows) (err error) {
			jobs, err = pgx.AppendRows(jobs, rows, scanStagedJob)
			return err
		})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("error locking staged jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *StagedJob) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}

// scanStagedJob reads the columns the lock functions select.
func scanStagedJob(row pgx.CollectableRow) (*StagedJob, error) {
	var j StagedJob
	err := row.Scan(&j.ID, &j.CreatedAt, &j.JobName, &j.JobArgs, &j.UserID, &j.TraceContext)
	return &j, err
}

// StagedJobDeleteByIDs deletes the staged jobs with exactly these ids and returns how many it
// deleted. It never deletes up to a bound such as the largest id handed over, the bug of the
// article's original enqueuer. A row takes its id when it is inserted, not when it commits, so a
// row below the bound may have committed after the batch was read, or be locked by another
// enqueuer, and deleting it would lose its job.
func StagedJobDeleteByIDs(ctx context.Context, db DBTX, ids []int64) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM staged_jobs WHERE id = ANY($1)`, ids)
	if err != nil {
		return 0, fmt.Errorf("error deleting staged jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}

// StagedJobMarkFailed sets a staged job aside. The job stays in staged_jobs, where a person finds
// it (see migrations/00005_staged_jobs_failures.sql), and enqueuers no longer take it. lastError
// is cut to fit its column (SanitizeErrorText). It returns ErrNotFound if there is no such job.
func StagedJobMarkFailed(ctx context.Context, db DBTX, id int64, lastError string) error {
	// The column's CHECK refuses an empty error too.
	tag, err := db.Exec(ctx, `UPDATE staged_jobs SET failed_at = now(), last_error = $2 WHERE id = $1`,
		id, cmp.Or(SanitizeErrorText(lastError), "unknown error"))
	if err != nil {
		return fmt.Errorf("error marking staged job %d failed: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("error marking staged job %d failed: %w", id, ErrNotFound)
	}
	return nil
}

// StagedJobBacklog counts what staged_jobs holds, for the enqueuer's metrics.
type StagedJobBacklog struct {
	// Pending jobs wait to be enqueued: every row not set aside, whatever its job name.
	Pending int64

	// Failed jobs were set aside and wait for a person.
	Failed int64

	// OldestPendingAge is the age of the oldest pending job by the database's clock, which
	// stamped its created_at; 0 when none is pending.
	OldestPendingAge time.Duration
}

// StagedJobCountBacklog counts the staged jobs. The table holds few rows while the enqueuer
// keeps up, so counting them is cheap, and a backlog shows at once.
func StagedJobCountBacklog(ctx context.Context, db DBTX) (*StagedJobBacklog, error) {
	var b StagedJobBacklog
	var ageSeconds float64
	err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE failed_at IS NULL),
		       count(*) FILTER (WHERE failed_at IS NOT NULL),
		       coalesce(greatest(extract(epoch FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL)), 0), 0)::float8
		FROM staged_jobs`).Scan(&b.Pending, &b.Failed, &ageSeconds)
	if err != nil {
		return nil, fmt.Errorf("error counting staged jobs: %w", err)
	}
	b.OldestPendingAge = time.Duration(ageSeconds * float64(time.Second))
	return &b, nil
}

// StagedJobsStranded counts the staged jobs that an enqueuer knowing jobNames leaves where they
// are, so that it can remind an operator of them.
type StagedJobsStranded struct {
	// Failed jobs were set aside and wait for a person.
	Failed int64

	// UnknownName jobs have a job name not in jobNames: staged by a newer release during a
	// rolling deploy (they go once it is done), or by a release whose workers are gone.
	UnknownName int64
}

// StagedJobCountStranded counts the staged jobs that StagedJobLockBatch does not take.
func StagedJobCountStranded(ctx context.Context, db DBTX, jobNames []string) (*StagedJobsStranded, error) {
	var s StagedJobsStranded
	err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE failed_at IS NOT NULL),
		       count(*) FILTER (WHERE failed_at IS NULL AND job_name <> ALL($1))
		FROM staged_jobs`, jobNames).Scan(&s.Failed, &s.UnknownName)
	if err != nil {
		return nil, fmt.Errorf("error counting stranded staged jobs: %w", err)
	}
	return &s, nil
}

// StagedJobListFailed returns up to limit staged jobs that the enqueuer set aside, the most
// recently failed first, for a person to deal with.
func StagedJobListFailed(ctx context.Context, db DBTX, limit int) ([]*StagedJob, error) {
	rows, err := db.Query(ctx, `
		SELECT id, created_at, job_name, job_args, failed_at, last_error
		FROM staged_jobs
		WHERE failed_at IS NOT NULL
		ORDER BY failed_at DESC, id DESC
		LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("error listing failed staged jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*StagedJob, error) {
		var j StagedJob
		err := row.Scan(&j.ID, &j.CreatedAt, &j.JobName, &j.JobArgs, &j.FailedAt, &j.LastError)
		return &j, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing failed staged jobs: %w", err)
	}
	return jobs, nil
}

// StagedJobRetry hands a failed staged job back to the enqueuer, once the failure's cause is
// fixed (a worker for the job name deployed, the arguments corrected). It clears the failure and
// wakes the enqueuer on StagedJobsChannel. Inside a transaction, the notification arrives as the
// transaction commits; an operator's retry is far too rare for the lock that costs to matter.
// It returns ErrNotFound if there is no such job, or the job has not failed: it waits for the
// enqueuer already, or was enqueued and is gone from staged_jobs.
func StagedJobRetry(ctx context.Context, db DBTX, id int64) error {
	tag, err := db.Exec(ctx, `
		UPDATE staged_jobs
		SET failed_at = NULL, last_error = NULL
		WHERE id = $1 AND failed_at IS NOT NULL`, id)
	if err != nil {
		return fmt.Errorf("error retrying staged job %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("no failed staged job %d: %w", id, ErrNotFound)
	}
	return StagedJobsNotify(ctx, db)
}
