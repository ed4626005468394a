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
-- Keys stored before this migration keep the random Stripe key they were created with: nothing
-- derives it again, and a random key never collides with a derived one.
--
-- The Stripe key is not unique by itself. Two first requests of one rider's key, racing, derive
-- the same one, and the loser must learn of the winner through the serialization failure that
-- the unique index on (user_id, idempotency_key) gives it under SERIALIZABLE, which a retry turns
-- into a replay or a 409. A unique index on the Stripe key would be checked first, and answer
-- with a unique violation, since the transaction never read that index. Uniqueness follows from
-- the rider's: one (user_id, idempotency_key) derives one Stripe key.

-- +goose Up
CREATE TABLE stripe_key_secret (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    created_at timestamptz NOT NULL DEFAULT now(),
    secret     bytea       NOT NULL CHECK (octet_length(secret) = 32)
);

INSERT INTO stripe_key_secret (secret)
VALUES (sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8')));

ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_stripe_idempotency_key_key;

-- +goose Down
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_stripe_idempotency_key_key UNIQUE (stripe_idempotency_key);
DROP TABLE stripe_key_secret;
