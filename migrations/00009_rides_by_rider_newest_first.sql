-- A rider's rides, newest first, for GET /rides: the index holds them in that order, so that a
-- page is read straight off it, whatever the rider's history. It replaces the index on user_id
-- alone, which its first column serves as well.
--
-- Built concurrently, outside a transaction, so that bookings go on while it builds.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id_created_at_id ON rides (user_id, created_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS rides_user_id;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS rides_user_id ON rides (user_id);
DROP INDEX CONCURRENTLY IF EXISTS rides_user_id_created_at_id;
