-- The rider first in every key of the rider tables: idempotency_keys, rides, audit_records and
-- abandoned_requests; and staged_jobs learns whose job it is. Every row of them is one rider's,
-- and every statement of a request names the rider, so that Citus can distribute them by
-- user_id, co-located, and run each ride transaction on the one worker that holds its rider
-- (docs/scale-out.md). Citus refuses
-- a primary key, a unique constraint or a foreign key that leaves the distribution column out.
--
-- What changes for a single Postgres: a charge id and a refund id are unique per rider rather
-- than across riders. They are Stripe's own ids, which no two riders could share, so nothing that
-- could happen is refused any more than before. A charge id is still looked up alone (a webhook
-- names no rider), by a plain index.
--
-- The foreign keys that recycle a key (the reaper deletes it) set only the key's column to NULL,
-- never user_id (Postgres 15's ON DELETE SET NULL (column)).
--
-- Every new index is built concurrently and each constraint swapped onto it, validated apart,
-- so that bookings go on throughout; outside a transaction. A run stopped halfway is run again:
-- an index its interruption left invalid is dropped first and built anew.
--
-- While the release before this one still runs (a rolling deploy), its lookups by id alone find
-- no index on id, and scan; the rollout should be short.

-- +goose NO TRANSACTION
-- +goose Up

-- staged_jobs learns whose job it is, from the job's own arguments (every job kind carries a
-- numeric user_id). Nullable, and its primary key stays on id: the release before this one,
-- still running during a rolling deploy, stages jobs without it. migrations.CitusUp makes it NOT
-- NULL and leads the primary key with it when it distributes the table, which a deploy does
-- once every process runs this release.
ALTER TABLE staged_jobs ADD COLUMN IF NOT EXISTS user_id bigint;
UPDATE staged_jobs SET user_id = (job_args->>'user_id')::bigint
WHERE user_id IS NULL AND job_args->>'user_id' ~ '^[0-9]{1,18}$';

-- An index a stopped run left invalid (CREATE INDEX CONCURRENTLY interrupted) is dropped, so
-- that the builds below make it anew instead of finding its name taken.
-- +goose StatementBegin
DO $$
DECLARE
    invalid record;
BEGIN
    FOR invalid IN
        SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname IN ('idempotency_keys_user_id_id', 'rides_user_id_id',
            'rides_user_id_idempotency_key_id', 'rides_user_id_stripe_charge_id', 'rides_stripe_charge_id',
            'rides_user_id_cancel_idempotency_key_id', 'rides_user_id_stripe_refund_id',
            'audit_records_user_id_id', 'abandoned_requests_user_id_id',
            'abandoned_requests_user_id_idempotency_key_id', 'abandoned_requests_user_id_ride_id')
    LOOP
        EXECUTE format('DROP INDEX %I', invalid.relname);
    END LOOP;
END $$;
-- +goose StatementEnd

-- The new unique indexes, built while writes go on.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_user_id_id ON idempotency_keys (user_id, id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_id ON rides (user_id, id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_idempotency_key_id ON rides (user_id, idempotency_key_id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_stripe_charge_id ON rides (user_id, stripe_charge_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS rides_stripe_charge_id ON rides (stripe_charge_id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_cancel_idempotency_key_id
    ON rides (user_id, cancel_idempotency_key_id) WHERE cancel_idempotency_key_id IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_stripe_refund_id
    ON rides (user_id, stripe_refund_id) WHERE stripe_refund_id IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS audit_records_user_id_id ON audit_records (user_id, id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS abandoned_requests_user_id_id ON abandoned_requests (user_id, id);
-- For the foreign keys' lookups when a key or a ride is deleted.
CREATE INDEX CONCURRENTLY IF NOT EXISTS abandoned_requests_user_id_idempotency_key_id
    ON abandoned_requests (user_id, idempotency_key_id) WHERE idempotency_key_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS abandoned_requests_user_id_ride_id
    ON abandoned_requests (user_id, ride_id) WHERE ride_id IS NOT NULL;

-- The foreign keys onto the old primary keys go; those onto the new ones come back below.
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_idempotency_key_id_fkey;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_cancel_idempotency_key_id_fkey;
ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_idempotency_key_id_fkey;
ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_ride_id_fkey;
-- stripe_events is not a rider table (an event names no rider); it keeps the ride it changed
-- as a plain id.
ALTER TABLE stripe_events DROP CONSTRAINT IF EXISTS stripe_events_ride_id_fkey;

-- Each primary key and unique constraint onto its index with the rider first. A table without
-- a primary key (a run stopped between these two statements) gets it on the next run.
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY USING INDEX idempotency_keys_user_id_id;

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_pkey;
ALTER TABLE rides ADD CONSTRAINT rides_pkey PRIMARY KEY USING INDEX rides_user_id_id;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_idempotency_key_id_key;
ALTER TABLE rides ADD CONSTRAINT rides_idempotency_key_id_key UNIQUE USING INDEX rides_user_id_idempotency_key_id;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_stripe_charge_id_key;
ALTER TABLE rides ADD CONSTRAINT rides_stripe_charge_id_key UNIQUE USING INDEX rides_user_id_stripe_charge_id;
DROP INDEX CONCURRENTLY IF EXISTS rides_cancel_idempotency_key_id;
DROP INDEX CONCURRENTLY IF EXISTS rides_stripe_refund_id;

ALTER TABLE audit_records DROP CONSTRAINT IF EXISTS audit_records_pkey;
ALTER TABLE audit_records ADD CONSTRAINT audit_records_pkey PRIMARY KEY USING INDEX audit_records_user_id_id;

ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_pkey;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_pkey PRIMARY KEY USING INDEX abandoned_requests_user_id_id;


-- The foreign keys, rider first, setting only the recycled column to NULL.
ALTER TABLE rides ADD CONSTRAINT rides_idempotency_key_id_fkey
    FOREIGN KEY (user_id, idempotency_key_id) REFERENCES idempotency_keys (user_id, id)
    ON DELETE SET NULL (idempotency_key_id) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_idempotency_key_id_fkey;
ALTER TABLE rides ADD CONSTRAINT rides_cancel_idempotency_key_id_fkey
    FOREIGN KEY (user_id, cancel_idempotency_key_id) REFERENCES idempotency_keys (user_id, id)
    ON DELETE SET NULL (cancel_idempotency_key_id) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_cancel_idempotency_key_id_fkey;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_idempotency_key_id_fkey
    FOREIGN KEY (user_id, idempotency_key_id) REFERENCES idempotency_keys (user_id, id)
    ON DELETE SET NULL (idempotency_key_id) NOT VALID;
ALTER TABLE abandoned_requests VALIDATE CONSTRAINT abandoned_requests_idempotency_key_id_fkey;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_ride_id_fkey
    FOREIGN KEY (user_id, ride_id) REFERENCES rides (user_id, id)
    ON DELETE SET NULL (ride_id) NOT VALID;
ALTER TABLE abandoned_requests VALIDATE CONSTRAINT abandoned_requests_ride_id_fkey;

-- +goose Down
ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_ride_id_fkey;
ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_idempotency_key_id_fkey;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_cancel_idempotency_key_id_fkey;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_idempotency_key_id_fkey;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS abandoned_requests_id ON abandoned_requests (id);
ALTER TABLE abandoned_requests DROP CONSTRAINT IF EXISTS abandoned_requests_pkey;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_pkey PRIMARY KEY USING INDEX abandoned_requests_id;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS audit_records_id ON audit_records (id);
ALTER TABLE audit_records DROP CONSTRAINT IF EXISTS audit_records_pkey;
ALTER TABLE audit_records ADD CONSTRAINT audit_records_pkey PRIMARY KEY USING INDEX audit_records_id;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_stripe_refund_id ON rides (stripe_refund_id) WHERE stripe_refund_id IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_cancel_idempotency_key_id
    ON rides (cancel_idempotency_key_id) WHERE cancel_idempotency_key_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS rides_user_id_stripe_refund_id;
DROP INDEX CONCURRENTLY IF EXISTS rides_user_id_cancel_idempotency_key_id;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_stripe_charge_id_unique ON rides (stripe_charge_id);
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_stripe_charge_id_key;
ALTER TABLE rides ADD CONSTRAINT rides_stripe_charge_id_key UNIQUE USING INDEX rides_stripe_charge_id_unique;
DROP INDEX CONCURRENTLY IF EXISTS rides_stripe_charge_id;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_idempotency_key_id_unique ON rides (idempotency_key_id);
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_idempotency_key_id_key;
ALTER TABLE rides ADD CONSTRAINT rides_idempotency_key_id_key UNIQUE USING INDEX rides_idempotency_key_id_unique;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_id ON rides (id);
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_pkey;
ALTER TABLE rides ADD CONSTRAINT rides_pkey PRIMARY KEY USING INDEX rides_id;

CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS idempotency_keys_id ON idempotency_keys (id);
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY USING INDEX idempotency_keys_id;

ALTER TABLE rides ADD CONSTRAINT rides_idempotency_key_id_fkey
    FOREIGN KEY (idempotency_key_id) REFERENCES idempotency_keys ON DELETE SET NULL;
ALTER TABLE rides ADD CONSTRAINT rides_cancel_idempotency_key_id_fkey
    FOREIGN KEY (cancel_idempotency_key_id) REFERENCES idempotency_keys ON DELETE SET NULL;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_idempotency_key_id_fkey
    FOREIGN KEY (idempotency_key_id) REFERENCES idempotency_keys ON DELETE SET NULL;
ALTER TABLE abandoned_requests ADD CONSTRAINT abandoned_requests_ride_id_fkey
    FOREIGN KEY (ride_id) REFERENCES rides ON DELETE SET NULL;
ALTER TABLE stripe_events ADD CONSTRAINT stripe_events_ride_id_fkey
    FOREIGN KEY (ride_id) REFERENCES rides ON DELETE SET NULL;
DROP INDEX CONCURRENTLY IF EXISTS abandoned_requests_user_id_ride_id;
DROP INDEX CONCURRENTLY IF EXISTS abandoned_requests_user_id_idempotency_key_id;
ALTER TABLE staged_jobs DROP COLUMN IF EXISTS user_id;
