-- The planner judges every rider by the average. Every statement on a rider table names the
-- rider and a row of theirs (a key, a ride), so how many rows one rider has only breaks ties
-- between indexes. But once the statistics' list of most common values holds every rider (a
-- young table, or a Citus shard of a few riders), a rider missing from it (any rider newer than
-- the last ANALYZE) looks like no rows at all, every index that leads with user_id looks as cheap
-- as the key, and the planner took one with fewer conditions: an update of one ride read all of
-- the rider's rides, taking predicate locks over them, which failed other riders' SERIALIZABLE
-- transactions (docs/scale-out.md). A statistics target of 1 keeps one common value, so the
-- rest share what is left, about a rider's average. Each table is analyzed whole, whose sample
-- (the other columns' target) is large enough to count the riders.
--
-- On Citus, whose distributed tables refuse SET STATISTICS, the ALTERs change the coordinator's
-- tables only (Citus copies their target into every shard it creates later), and the shards that
-- exist already are set one by one. Every statement is safe to run again.

-- +goose Up
SELECT set_config('citus.enable_ddl_propagation', 'off', true);
ALTER TABLE idempotency_keys ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE rides ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE audit_records ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE abandoned_requests ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE staged_jobs ALTER COLUMN user_id SET STATISTICS 1;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
    failed text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        FOR t IN SELECT logicalrelid::regclass::text FROM pg_dist_partition
            WHERE logicalrelid::regclass::text IN ('idempotency_keys', 'rides', 'audit_records', 'abandoned_requests', 'staged_jobs')
        LOOP
            SELECT string_agg(result, '; ') INTO failed
            FROM run_command_on_shards(t, 'ALTER TABLE %s ALTER COLUMN user_id SET STATISTICS 1')
            WHERE NOT success;
            IF failed IS NOT NULL THEN
                RAISE EXCEPTION 'error setting the statistics target of the shards of %: %', t, failed;
            END IF;
        END LOOP;
    END IF;
END $$;
-- +goose StatementEnd

SELECT set_config('citus.enable_ddl_propagation', 'on', true); -- so that ANALYZE reaches the shards
ANALYZE idempotency_keys, rides, audit_records, abandoned_requests, staged_jobs;

-- +goose Down
SELECT set_config('citus.enable_ddl_propagation', 'off', true);
ALTER TABLE idempotency_keys ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE rides ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE audit_records ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE abandoned_requests ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE staged_jobs ALTER COLUMN user_id SET STATISTICS -1;

-- +goose StatementBegin
DO $$
DECLARE
    t text;
    failed text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        FOR t IN SELECT logicalrelid::regclass::text FROM pg_dist_partition
            WHERE logicalrelid::regclass::text IN ('idempotency_keys', 'rides', 'audit_records', 'abandoned_requests', 'staged_jobs')
        LOOP
            SELECT string_agg(result, '; ') INTO failed
            FROM run_command_on_shards(t, 'ALTER TABLE %s ALTER COLUMN user_id SET STATISTICS -1')
            WHERE NOT success;
            IF failed IS NOT NULL THEN
                RAISE EXCEPTION 'error setting the statistics target of the shards of %: %', t, failed;
            END IF;
        END LOOP;
    END IF;
END $$;
-- +goose StatementEnd
