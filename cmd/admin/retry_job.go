package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rocketrides/rocketrides/models"
)

// retryJob puts one failed job back to work, once its cause is fixed (the mail server is back,
// a worker for the job's name is deployed, the rider's address corrected), and says so on one
// line. A River job becomes available at once, with one more attempt if it had used up its
// attempts, and the worker runs it as any other. A staged job is handed back to the enqueuer,
// which moves it into River at once (it is woken, as by a newly staged job).
func retryJob(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return &cli.UsageError{Err: errors.New("retry-job: give one job id, river:ID or staged:ID, as list-failed-jobs prints them")}
	}
	id, err := parseFailedJobID(args[0])
	if err != nil {
		return &cli.UsageError{Err: fmt.Errorf("retry-job: %w", err)}
	}

	pool, client, err := openRiver(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	if id.source == sourceStaged {
		return retryStagedJob(ctx, pool, id)
	}
	return retryRiverJob(ctx, client, id)
}

// retryRiverJob retries a River job that failed for good: discarded after its last attempt, or
// cancelled by its worker as pointless, which may no longer be true. Any other job is left alone:
// a completed one would run a second time, and a running, waiting or retryable one is at work
// already.
func retryRiverJob(ctx context.Context, client *river.Client[pgx.Tx], id failedJobID) error {
	job, err := client.JobGet(ctx, id.id)
	if errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("retry-job: no River job %d", id.id)
	}
	if err != nil {
		return fmt.Errorf("error getting River job %d: %w", id.id, err)
	}
	if job.State != rivertype.JobStateDiscarded && job.State != rivertype.JobStateCancelled {
		return fmt.Errorf("retry-job: %s is %s, not discarded or cancelled: there is nothing to retry", id, job.State)
	}
	job, err = client.JobRetry(ctx, id.id)
	if err != nil {
		return fmt.Errorf("error retrying River job %d: %w", id.id, err)
	}
	fmt.Printf("%s (%s) is %s again: %d of its %d attempts used\n", id, job.Kind, job.State, job.Attempt, job.MaxAttempts)
	return nil
}

// retryStagedJob clears a staged job's failure and wakes the enqueuer (models.StagedJobRetry).
func retryStagedJob(ctx context.Context, pool *pgxpool.Pool, id failedJobID) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return models.StagedJobRetry(ctx, tx, id.id) })
	if errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("retry-job: %s is no failed staged job: there is none, or it waits for the enqueuer or was enqueued already", id)
	}
	if err != nil {
		return err
	}
	fmt.Printf("%s is staged again, for the enqueuer to move into River\n", id)
	return nil
}
