-- Staged jobs that the enqueuer could not hand to River are kept in staged_jobs, marked failed,
-- rather than deleted: until a person has looked at one, it is a receipt that nobody has sent.
-- The enqueuer skips failed rows, so they cannot block the jobs behind them, and never deletes
-- them. To list them, and to hand one back to the enqueuer once its cause is fixed:
--
--     SELECT id, created_at, job_name, job_args, failed_at, last_error
--     FROM staged_jobs WHERE failed_at IS NOT NULL ORDER BY id;
--
--     UPDATE staged_jobs SET failed_at = NULL, last_error = NULL WHERE id = ...;

-- +goose Up
ALTER TABLE staged_jobs
    -- When the enqueuer set the job aside; NULL while the job waits to be enqueued.
    ADD COLUMN failed_at  timestamptz,

    -- Why, as the enqueuer saw it; models.StagedJobMarkFailed cuts longer messages to fit.
    ADD COLUMN last_error text CHECK (char_length(last_error) BETWEEN 1 AND 2000),

    ADD CONSTRAINT staged_jobs_failure_recorded_whole
        CHECK ((failed_at IS NULL) = (last_error IS NULL));

-- The enqueuer takes the oldest rows that have not failed. Without this index, failed rows kept
-- for days would be stepped over, in id order, on every pass.
CREATE INDEX staged_jobs_pending_id ON staged_jobs (id) WHERE failed_at IS NULL;

-- +goose Down
DROP INDEX staged_jobs_pending_id;
ALTER TABLE staged_jobs
    DROP CONSTRAINT staged_jobs_failure_recorded_whole,
    DROP COLUMN last_error,
    DROP COLUMN failed_at;
