-- Random identifiers for the rows that the ride phases read and write under SERIALIZABLE.
--
-- Postgres takes a SERIALIZABLE read's predicate lock on a b-tree page, not on a key. With
-- bigserial ids every new key, ride and audit record lands on the rightmost leaf page of its
-- primary key (and of rides' unique index on idempotency_key_id), which every phase of every
-- request also reads: the requests of unrelated riders then form read/write dependency cycles,
-- and Postgres aborts some of them with 40001. Random ids spread the rows, and so the predicate
-- locks, over the whole index. Time-ordered ids (UUIDv7, ULIDs, timestamps) would rebuild the
-- hot page, so they are no fix.
--
-- The application makes its ids itself (models.NewID, 63 random bits), which lets it send a ride
-- and the rows that point at it in one round trip. random_id() is the default for everyone else
-- who inserts a row: an operator at psql, the benchmark's pgbench scripts.
--
-- staged_jobs and abandoned_requests keep their sequences: no SERIALIZABLE transaction reads
-- them, and the enqueuer drains staged jobs in id order, which is their age.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION random_id() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    -- 60 random bits of a version 4 UUID, less the sign bit: a positive bigint.
    SELECT ('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint
        & 9223372036854775807
$$;
-- +goose StatementEnd

ALTER TABLE idempotency_keys ALTER COLUMN id SET DEFAULT random_id();
DROP SEQUENCE idempotency_keys_id_seq;

ALTER TABLE rides ALTER COLUMN id SET DEFAULT random_id();
DROP SEQUENCE rides_id_seq;

ALTER TABLE audit_records ALTER COLUMN id SET DEFAULT random_id();
DROP SEQUENCE audit_records_id_seq;

-- +goose Down
CREATE SEQUENCE idempotency_keys_id_seq OWNED BY idempotency_keys.id;
SELECT setval('idempotency_keys_id_seq', coalesce(max(id), 0) + 1, false) FROM idempotency_keys;
ALTER TABLE idempotency_keys ALTER COLUMN id SET DEFAULT nextval('idempotency_keys_id_seq');

CREATE SEQUENCE rides_id_seq OWNED BY rides.id;
SELECT setval('rides_id_seq', coalesce(max(id), 0) + 1, false) FROM rides;
ALTER TABLE rides ALTER COLUMN id SET DEFAULT nextval('rides_id_seq');

CREATE SEQUENCE audit_records_id_seq OWNED BY audit_records.id;
SELECT setval('audit_records_id_seq', coalesce(max(id), 0) + 1, false) FROM audit_records;
ALTER TABLE audit_records ALTER COLUMN id SET DEFAULT nextval('audit_records_id_seq');

DROP FUNCTION random_id();
