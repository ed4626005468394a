-- What becomes of a ride after its booking: the rider cancels it (POST /rides/{id}/cancel, a
-- second request graph, started -> refund_created -> finished, which refunds the charge), or
-- Stripe tells us through a webhook that the charge was refunded from the dashboard or disputed
-- by the rider's bank.
--
-- Every statement here takes its table's lock for an instant only, so that bookings go on while
-- it runs: new columns have constant defaults (no rewrite), CHECKs and the foreign key are added
-- NOT VALID (no scan under the lock) and validated afterwards (a scan that blocks no writes), and
-- the indexes are built concurrently. Outside a transaction, which CREATE INDEX CONCURRENTLY
-- needs; each statement is safe to run again, so a migration stopped halfway is simply rerun.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE rides
    -- booked until something happens to the charge; the order of the states is their precedence
    -- (models.RideStatus), which is what lets webhooks arrive in any order.
    ADD COLUMN IF NOT EXISTS status text NOT NULL DEFAULT 'booked',

    -- The refund our cancel made, once Stripe made it.
    ADD COLUMN IF NOT EXISTS stripe_refund_id text,

    -- The cancel request that claimed the ride, so that a second cancel under another key is
    -- refused instead of refunded again. Keys are recycled by the reaper; the ride's status
    -- still says it was cancelled.
    ADD COLUMN IF NOT EXISTS cancel_idempotency_key_id bigint,

    -- The refund receipt, recorded as the ride receipt is (00004_ride_receipts.sql).
    ADD COLUMN IF NOT EXISTS refund_receipt_sent_at timestamptz,
    ADD COLUMN IF NOT EXISTS refund_receipt_message_id text;

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_status_known;
ALTER TABLE rides ADD CONSTRAINT rides_status_known
    CHECK (status IN ('booked', 'refunded', 'cancelled', 'disputed')) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_known;

-- Only a charged ride can be refunded, cancelled or disputed; a cancelled one has our refund.
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_status_needs_charge;
ALTER TABLE rides ADD CONSTRAINT rides_status_needs_charge
    CHECK (status = 'booked' OR stripe_charge_id IS NOT NULL) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_needs_charge;

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_cancel_has_refund;
ALTER TABLE rides ADD CONSTRAINT rides_cancel_has_refund
    CHECK ((status <> 'cancelled' OR stripe_refund_id IS NOT NULL)
        AND (stripe_refund_id IS NULL OR char_length(stripe_refund_id) BETWEEN 1 AND 255)) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_cancel_has_refund;

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_refund_receipt_recorded_whole;
ALTER TABLE rides ADD CONSTRAINT rides_refund_receipt_recorded_whole
    CHECK ((refund_receipt_sent_at IS NULL) = (refund_receipt_message_id IS NULL)
        AND (refund_receipt_message_id IS NULL OR char_length(refund_receipt_message_id) BETWEEN 3 AND 255)
        AND (refund_receipt_sent_at IS NULL OR stripe_refund_id IS NOT NULL)) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_refund_receipt_recorded_whole;

-- The reaper deletes keys, and the foreign key below then looks for rides that name the key:
-- without an index, a scan of rides per deleted key. Partial, since few rides are cancelled.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_cancel_idempotency_key_id
    ON rides (cancel_idempotency_key_id) WHERE cancel_idempotency_key_id IS NOT NULL;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS rides_stripe_refund_id
    ON rides (stripe_refund_id) WHERE stripe_refund_id IS NOT NULL;

-- For the admin listing of disputed rides, which a person works through.
CREATE INDEX CONCURRENTLY IF NOT EXISTS rides_disputed_created_at
    ON rides (created_at) WHERE status = 'disputed';

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_cancel_idempotency_key_id_fkey;
ALTER TABLE rides ADD CONSTRAINT rides_cancel_idempotency_key_id_fkey
    FOREIGN KEY (cancel_idempotency_key_id) REFERENCES idempotency_keys ON DELETE SET NULL NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_cancel_idempotency_key_id_fkey;

-- The cancel graph's recovery point joins the ride's.
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_recovery_point_known;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_known
    CHECK (recovery_point IN ('started', 'ride_created', 'charge_created', 'refund_created', 'finished')) NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_recovery_point_known;

-- The Stripe events a webhook applied, each once: an event's id is inserted in the transaction
-- that applies it, so a delivery Stripe repeats finds its id here and changes nothing.
CREATE TABLE IF NOT EXISTS stripe_events (
    id          text        PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 255),
    type        text        NOT NULL CHECK (char_length(type) BETWEEN 1 AND 100),

    -- When Stripe created the event, and when it reached us.
    created_at  timestamptz NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),

    -- The ride it changed, if any.
    ride_id     bigint      REFERENCES rides ON DELETE SET NULL
);

-- +goose Down
DROP TABLE IF EXISTS stripe_events;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_recovery_point_known;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check
    CHECK (recovery_point IN ('started', 'ride_created', 'charge_created', 'finished')) NOT VALID;
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_cancel_idempotency_key_id_fkey;
DROP INDEX CONCURRENTLY IF EXISTS rides_disputed_created_at;
DROP INDEX CONCURRENTLY IF EXISTS rides_stripe_refund_id;
DROP INDEX CONCURRENTLY IF EXISTS rides_cancel_idempotency_key_id;
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_refund_receipt_recorded_whole,
    DROP CONSTRAINT IF EXISTS rides_cancel_has_refund,
    DROP CONSTRAINT IF EXISTS rides_status_needs_charge,
    DROP CONSTRAINT IF EXISTS rides_status_known,
    DROP COLUMN IF EXISTS refund_receipt_message_id,
    DROP COLUMN IF EXISTS refund_receipt_sent_at,
    DROP COLUMN IF EXISTS cancel_idempotency_key_id,
    DROP COLUMN IF EXISTS stripe_refund_id,
    DROP COLUMN IF EXISTS status;
