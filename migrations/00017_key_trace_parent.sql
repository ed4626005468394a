-- An idempotency key remembers the trace of the request that last wrote it (its W3C
-- traceparent), so that a retry's trace links to the attempt before it. NULL when that request
-- was not traced. A nullable column without a default is added without rewriting the table,
-- and the release before this one names its columns and never reads it.

-- +goose Up
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS trace_parent text;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN IF EXISTS trace_parent;
