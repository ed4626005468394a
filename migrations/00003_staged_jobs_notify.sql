-- Wakes the enqueuer as soon as a job is staged, so that a receipt reaches the job queue within
-- moments of its request finishing instead of at the enqueuer's next poll. A notification is
-- delivered only when the inserting transaction commits, which is exactly when the enqueuer can
-- see the row. The channel name is enqueuer.NotifyChannel.
--
-- FOR EACH STATEMENT, with an empty payload: the enqueuer drains whatever is staged whenever it
-- wakes, so it needs to know that something arrived, not what. Postgres folds identical
-- notifications of one transaction into one, so a busy API sends one per request at most.
--
-- The price: a transaction that notified takes a cluster-wide lock while it commits, so the
-- commits of finishing requests queue behind one another for that moment. At Rocket Rides'
-- volume that is noise; a service committing thousands of such transactions a second would
-- rather poll, or notify from a single batching process.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION staged_jobs_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('staged_jobs', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER staged_jobs_notify
    AFTER INSERT ON staged_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION staged_jobs_notify();

-- +goose Down
DROP TRIGGER staged_jobs_notify ON staged_jobs;
DROP FUNCTION staged_jobs_notify();
