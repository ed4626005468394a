-- A Stripe event can come before its ride records the charge: Stripe may send a dispute or a
-- refund of a charge whose answer never reached us, before the retry records it. Such an event is
-- kept, with the charge it names and the status it reports, and applied in the transaction that
-- records the charge on its ride. An event is kept while ride_id is NULL and charge_id is not.
--
-- Safe for a rolling deploy: nullable columns with no default (no rewrite), which the release
-- before this one leaves NULL (its events are never kept, as before); CHECKs added NOT VALID and
-- validated afterwards (a scan that blocks no writes); the index built concurrently. Outside a
-- transaction, which CREATE INDEX CONCURRENTLY needs; each statement is safe to run again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE stripe_events
    ADD COLUMN IF NOT EXISTS charge_id text,
    ADD COLUMN IF NOT EXISTS ride_status text;

ALTER TABLE stripe_events DROP CONSTRAINT IF EXISTS stripe_events_charge_effect;
ALTER TABLE stripe_events ADD CONSTRAINT stripe_events_charge_effect
    CHECK ((charge_id IS NULL) = (ride_status IS NULL)
        AND (charge_id IS NULL OR char_length(charge_id) BETWEEN 1 AND 255)
        AND (ride_status IS NULL OR ride_status IN ('refunded', 'disputed'))) NOT VALID;
ALTER TABLE stripe_events VALIDATE CONSTRAINT stripe_events_charge_effect;

-- An index a stopped run left invalid is dropped, so that the build below makes it anew.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE NOT i.indisvalid AND c.relname = 'stripe_events_kept_charge_id') THEN
        DROP INDEX stripe_events_kept_charge_id;
    END IF;
END $$;
-- +goose StatementEnd

-- Every booking looks here for the events kept for its charge: few rows, and only those.
CREATE INDEX CONCURRENTLY IF NOT EXISTS stripe_events_kept_charge_id
    ON stripe_events (charge_id) WHERE ride_id IS NULL AND charge_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS stripe_events_kept_charge_id;
ALTER TABLE stripe_events DROP CONSTRAINT IF EXISTS stripe_events_charge_effect;
ALTER TABLE stripe_events
    DROP COLUMN IF EXISTS ride_status,
    DROP COLUMN IF EXISTS charge_id;
