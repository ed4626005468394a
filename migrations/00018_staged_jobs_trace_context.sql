-- The W3C trace context (traceparent, and tracestate when there is one) of the request that
-- staged a job, so that the enqueuer's hand-off and the worker's job join the request's trace
-- (docs/operations.md). NULL when tracing is off. A column of the staged row rather than a field
-- of job_args: the args are the job's own data, hashed by River for uniqueness and read by the
-- worker, while the trace context is where the job came from, which River keeps in a job's
-- metadata, where the enqueuer puts it.
--
-- A nullable column with no default rewrites no row and holds its lock only for a moment.

-- +goose Up
ALTER TABLE staged_jobs ADD COLUMN trace_context jsonb;

-- +goose Down
ALTER TABLE staged_jobs DROP COLUMN trace_context;
