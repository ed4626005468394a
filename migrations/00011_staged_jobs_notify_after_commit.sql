-- The enqueuer is woken after the commit, not by it: the API sends one NOTIFY, coalesced per
-- process, once a request's transaction that staged jobs has committed (phases'
-- stagedJobsNotifier), and the trigger of 00003 goes.
--
-- A transaction that notifies takes a database-wide lock while it commits, so with the trigger
-- every ride's last commit queued behind every other's; and on a distributed database a
-- notification fired on a worker reaches only that worker's listeners. The enqueuer's poll
-- still covers a notification that is never sent.
--
-- Deploy the release that notifies before running this: until then, a process of the release
-- before relies on the trigger, and without it its receipts wait for the enqueuer's poll.

-- +goose Up
DROP TRIGGER IF EXISTS staged_jobs_notify ON staged_jobs;
DROP FUNCTION IF EXISTS staged_jobs_notify();

-- +goose Down
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
