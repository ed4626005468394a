-- A key's lock becomes a lease that its request renews while it runs, and its fencing token a
-- generation number.
--
-- The article's lock timeout had to outlast the longest request (a Stripe call included), so a
-- request that died kept its key locked for all of it: 90 s of 409s for every retry. A lease
-- can be short, a few seconds, because the live request keeps extending it (every third of
-- the lease, and at every atomic phase's commit); a dead one stops, and its key is free again
-- within one lease.
--
-- locked_until is when the lease runs out. Everyone judges a lock by it alone, by the
-- database's clock: the key is locked while locked_until > now(). No process needs to know
-- another's lease length.
--
-- lock_generation goes up at every acquisition, and is what every phase's write and the unlock
-- are fenced on: a request that lost its lease, and whose key another request took over, finds
-- a newer generation and commits nothing. It replaces comparing locked_at timestamps, which two
-- acquisitions in one clock tick could share.
--
-- locked_at stays: when the current holder took the lock, for people reading the table.

-- +goose Up
ALTER TABLE idempotency_keys
    ADD COLUMN locked_until    timestamptz,
    ADD COLUMN lock_generation bigint NOT NULL DEFAULT 0 CHECK (lock_generation >= 0);

-- Locks taken by the previous release run out as its lock timeout said they would.
UPDATE idempotency_keys
SET locked_until = locked_at + interval '90 seconds', lock_generation = 1
WHERE locked_at IS NOT NULL;

ALTER TABLE idempotency_keys
    ALTER COLUMN locked_at DROP DEFAULT,
    ADD CONSTRAINT idempotency_keys_lease_whole CHECK ((locked_at IS NULL) = (locked_until IS NULL));

-- +goose Down
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_lease_whole,
    ALTER COLUMN locked_at SET DEFAULT now(),
    DROP COLUMN lock_generation,
    DROP COLUMN locked_until;
