-- The planner judges every rider by the average. Every statement on a rider table names the
-- rider and a row of theirs (a key, a ride), so how many rows one rider has only breaks ties
-- between indexes. But once the statistics' list of most common values holds every rider (a
-- young table, or a Citus shard of a few riders), a rider missing from it (any rider newer than
-- the last ANALYZE) looks like no rows at all, every index that leads with user_id looks as cheap
-- as the key, and the planner took one with fewer conditions: an update of one ride read all of
-- the rider's rides, taking predicate locks over them, which failed other riders' SERIALIZABLE
-- transactions (docs/scale-out.md). A statistics target of 1 keeps one common value, so the
-- rest share what is left, about a rider's average.
--
-- On Citus, whose distributed tables refuse SET STATISTICS, the statements change the
-- coordinator's table only, whose target Citus copies to every shard it creates; CitusUp sets
-- the existing shards'. Each statement is safe to run again.

-- +goose Up
SELECT set_config('citus.enable_ddl_propagation', 'off', true);
ALTER TABLE idempotency_keys ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE rides ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE audit_records ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE abandoned_requests ALTER COLUMN user_id SET STATISTICS 1;
ALTER TABLE staged_jobs ALTER COLUMN user_id SET STATISTICS 1;
ANALYZE idempotency_keys (user_id), rides (user_id), audit_records (user_id), abandoned_requests (user_id), staged_jobs (user_id);

-- +goose Down
SELECT set_config('citus.enable_ddl_propagation', 'off', true);
ALTER TABLE idempotency_keys ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE rides ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE audit_records ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE abandoned_requests ALTER COLUMN user_id SET STATISTICS -1;
ALTER TABLE staged_jobs ALTER COLUMN user_id SET STATISTICS -1;
