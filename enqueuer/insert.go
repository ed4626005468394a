package enqueuer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/rocketrides/rocketrides/models"
)

// insert inserts the jobs of stagedJobs into River in tx, and returns the staged jobs it could
// not: those that do not decode, and those River refuses.
func (e *Enqueuer) insert(ctx context.Context, tx pgx.Tx, stagedJobs []*models.StagedJob) ([]*failure, error) {
	var failures []*failure
	params := make([]river.InsertManyParams, 0, len(stagedJobs))
	decoded := make([]*models.StagedJob, 0, len(stagedJobs))
	for _, j := range stagedJobs {
		args, opts, err := e.decode(j.JobName, j.JobArgs)
		if err == nil && args == nil {
			err = errors.New("decoder returned no job args")
		}
		if err != nil {
			failures = append(failures, &failure{stagedJob: j, err: fmt.Errorf("error decoding staged job: %w", err)})
			continue
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: opts})
		decoded = append(decoded, j)
	}
	if len(params) == 0 {
		return failures, nil // River refuses an empty batch.
	}

	err := e.insertInSavepoint(ctx, tx, params)
	if err == nil || ctx.Err() != nil {
		return failures, err
	}

	// River inserts a batch in one statement, which fails whole for a single job River refuses
	// (invalid insert options, say), and also for two jobs with the same unique key: River
	// inserts unique jobs with ON CONFLICT DO UPDATE, which Postgres will not apply to one row
	// twice in one statement. Left alone, such a batch would fail on every pass and block all the
	// jobs staged after it. One job per statement isolates the refused ones, and lets River skip
	// the second of two duplicates as it would across batches.
	e.logger.WarnContext(ctx, "Enqueuer: batch insert failed, inserting jobs one at a time",
		slog.Int("num_jobs", len(params)), slog.String("error", err.Error()))
	for i := range params {
		if err := e.insertInSavepoint(ctx, tx, params[i:i+1]); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			failures = append(failures, &failure{stagedJob: decoded[i], err: err})
		}
	}
	return failures, nil
}

// insertInSavepoint inserts params into River in a savepoint of tx, so that a failed insert
// leaves tx usable for the next attempt.
func (e *Enqueuer) insertInSavepoint(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	savepoint, err := tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("error creating savepoint: %w", err)
	}
	if _, err := e.riverClient.InsertManyTx(ctx, savepoint, params); err != nil {
		// Should the rollback fail too, tx is unusable and its next statement says so.
		_ = savepoint.Rollback(ctx)
		return fmt.Errorf("error inserting jobs into River: %w", err)
	}
	if err := savepoint.Commit(ctx); err != nil {
		return fmt.Errorf("error releasing savepoint: %w", err)
	}
	return nil
}
