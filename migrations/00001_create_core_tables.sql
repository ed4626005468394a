-- The tables of the article, tightened: every column that can be NOT NULL is, every value the
-- application would reject is rejected by a CHECK as well, and every reference is a foreign key.

-- +goose Up
CREATE TABLE users (
    id                 bigserial   PRIMARY KEY,
    created_at         timestamptz NOT NULL DEFAULT now(),

    -- Stored lower-cased so that uniqueness is case-insensitive without an expression index.
    email              text        NOT NULL UNIQUE
        CHECK (char_length(email) BETWEEN 3 AND 255 AND email = lower(email) AND email LIKE '%_@_%'),

    -- The Stripe customer that holds the rider's card.
    stripe_customer_id text        NOT NULL UNIQUE
        CHECK (char_length(stripe_customer_id) BETWEEN 1 AND 255),

    -- SHA-256 of the rider's API token. The token itself is shown once and never stored, so a
    -- copy of this table authenticates nobody.
    api_token_hash     bytea       NOT NULL UNIQUE
        CHECK (octet_length(api_token_hash) = 32)
);

CREATE TABLE idempotency_keys (
    id                     bigserial   PRIMARY KEY,
    created_at             timestamptz NOT NULL DEFAULT now(),

    -- The client's key, scoped to its user by the unique index below.
    idempotency_key        text        NOT NULL
        CHECK (char_length(idempotency_key) BETWEEN 20 AND 255),

    last_run_at            timestamptz NOT NULL DEFAULT now(),

    -- Set while a request is working the key; NULL when nobody is. Its exact value doubles as
    -- the fencing token: every phase checks that locked_at is still the value it wrote.
    locked_at              timestamptz DEFAULT now(),

    request_method         text        NOT NULL CHECK (char_length(request_method) <= 10),
    request_params         jsonb       NOT NULL,
    request_path           text        NOT NULL CHECK (char_length(request_path) <= 100),

    -- Where the request came from, so that the completer can finish it as the client would.
    origin_ip              inet        NOT NULL,

    -- Set when the request finished, successfully or with an error no retry can change.
    response_code          int         CHECK (response_code BETWEEN 100 AND 599),
    response_body          jsonb,

    recovery_point         text        NOT NULL
        CHECK (recovery_point IN ('started', 'ride_created', 'charge_created', 'finished')),

    -- The key we send to Stripe. Random rather than derived from id: row ids repeat across
    -- databases (a reset, a second region), and Stripe would replay another ride's charge.
    stripe_idempotency_key text        NOT NULL UNIQUE
        CHECK (char_length(stripe_idempotency_key) BETWEEN 20 AND 255),

    -- The first time a charge for this key was sent to Stripe. Stripe forgets idempotency keys
    -- after 24 hours, so a charge may be re-sent only while this is recent enough.
    charge_attempted_at    timestamptz,

    -- The last error that stopped a run of this key, for whoever has to look at it.
    last_error             text        CHECK (char_length(last_error) <= 2000),

    user_id                bigint      NOT NULL REFERENCES users ON DELETE RESTRICT,

    CONSTRAINT idempotency_keys_finished_has_response
        CHECK ((recovery_point = 'finished') = (response_code IS NOT NULL AND response_body IS NOT NULL)),
    CONSTRAINT idempotency_keys_finished_is_unlocked
        CHECK (recovery_point <> 'finished' OR locked_at IS NULL)
);

CREATE UNIQUE INDEX idempotency_keys_user_id_idempotency_key
    ON idempotency_keys (user_id, idempotency_key);

-- For the reaper, which deletes by age.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- For the completer, which looks only at keys that never finished: few, once the system is healthy.
CREATE INDEX idempotency_keys_unfinished_last_run_at
    ON idempotency_keys (last_run_at)
    WHERE recovery_point <> 'finished';

CREATE TABLE rides (
    id                 bigserial       PRIMARY KEY,
    created_at         timestamptz     NOT NULL DEFAULT now(),

    -- Lets a retried request find the ride it already created. Keys are recycled by the reaper,
    -- rides are not: hence SET NULL.
    idempotency_key_id bigint          UNIQUE REFERENCES idempotency_keys ON DELETE SET NULL,

    origin_lat         numeric(13, 10) NOT NULL CHECK (origin_lat BETWEEN -90 AND 90),
    origin_lon         numeric(13, 10) NOT NULL CHECK (origin_lon BETWEEN -180 AND 180),
    target_lat         numeric(13, 10) NOT NULL CHECK (target_lat BETWEEN -90 AND 90),
    target_lon         numeric(13, 10) NOT NULL CHECK (target_lon BETWEEN -180 AND 180),

    -- NULL until Stripe has charged the ride.
    stripe_charge_id   text            UNIQUE CHECK (char_length(stripe_charge_id) BETWEEN 1 AND 255),

    user_id            bigint          NOT NULL REFERENCES users ON DELETE RESTRICT
);

CREATE INDEX rides_user_id ON rides (user_id);

CREATE TABLE audit_records (
    id            bigserial   PRIMARY KEY,
    action        text        NOT NULL CHECK (char_length(action) BETWEEN 1 AND 50),
    created_at    timestamptz NOT NULL DEFAULT now(),
    data          jsonb       NOT NULL,
    origin_ip     inet        NOT NULL,
    resource_id   bigint      NOT NULL,
    resource_type text        NOT NULL CHECK (char_length(resource_type) BETWEEN 1 AND 50),
    user_id       bigint      NOT NULL REFERENCES users ON DELETE RESTRICT
);

CREATE INDEX audit_records_resource ON audit_records (resource_type, resource_id);

-- Jobs inserted in the same transaction as the work that wants them, and handed to River by the
-- enqueuer only once that transaction has committed: the transactionally-staged job drain.
CREATE TABLE staged_jobs (
    id         bigserial   PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    job_name   text        NOT NULL CHECK (char_length(job_name) BETWEEN 1 AND 100),
    job_args   jsonb       NOT NULL
);

-- Requests that the system could not finish by itself, kept for a human to look at.
CREATE TABLE abandoned_requests (
    id                 bigserial   PRIMARY KEY,
    created_at         timestamptz NOT NULL DEFAULT now(),
    reason             text        NOT NULL CHECK (char_length(reason) BETWEEN 1 AND 100),

    -- The key may be reaped later; what it said is copied here.
    idempotency_key_id bigint      REFERENCES idempotency_keys ON DELETE SET NULL,
    idempotency_key    text        NOT NULL,
    user_id            bigint      NOT NULL REFERENCES users ON DELETE RESTRICT,
    request_params     jsonb       NOT NULL,
    recovery_point     text        NOT NULL,
    last_error         text,
    key_created_at     timestamptz NOT NULL,
    key_last_run_at    timestamptz NOT NULL,
    ride_id            bigint      REFERENCES rides ON DELETE SET NULL
);

-- +goose Down
DROP TABLE abandoned_requests;
DROP TABLE staged_jobs;
DROP TABLE audit_records;
DROP TABLE rides;
DROP TABLE idempotency_keys;
DROP TABLE users;
