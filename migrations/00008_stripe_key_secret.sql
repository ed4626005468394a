-- The secret that a request's Stripe idempotency key is derived from, so that the same rider
-- retrying the same client key sends Stripe the same key even when this database has lost the
-- key's row: a restore from a backup taken before it, or a failover to a standby that never
-- received it. A key drawn at random for each row would then be new, and Stripe would charge the
-- rider a second time.
--
-- The secret lives here, in the database, on purpose. Every backup, replica and restore of this
-- database carries it, so a key derived before the loss comes out the same after it. A database
-- created afresh (a reset, a second region) draws its own, so that its riders' ids, which repeat
-- across databases, never derive another database's Stripe keys.
--
-- One row, 32 bytes from two gen_random_uuid() values, which Postgres draws from its strong
-- random source (pg_strong_random): 244 random bits, hashed to a full-width HMAC key.
--
-- Keys stored before this migration keep the random Stripe key they were created with.

-- +goose Up
CREATE TABLE stripe_key_secret (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    created_at timestamptz NOT NULL DEFAULT now(),
    secret     bytea       NOT NULL CHECK (octet_length(secret) = 32)
);

INSERT INTO stripe_key_secret (secret)
VALUES (sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')));

-- +goose Down
DROP TABLE stripe_key_secret;
