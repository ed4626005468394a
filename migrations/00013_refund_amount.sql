-- The amount our cancel's refund gave back, in the currency's smallest unit, as Stripe answered
-- it. A cancel refunds what is left of the charge, which is less than the fare when part of it
-- was refunded at Stripe's dashboard first; the refund receipt states this amount. NULL on rides
-- refunded before this column, whose receipts state the fare.
--
-- A nullable column with no default (no rewrite) and a CHECK added NOT VALID and validated
-- afterwards (a scan that blocks no writes), so that cancels go on while it runs; each statement
-- is safe to run again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE rides ADD COLUMN IF NOT EXISTS stripe_refund_amount bigint;

ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_refund_amount_of_refund;
ALTER TABLE rides ADD CONSTRAINT rides_refund_amount_of_refund
    CHECK (stripe_refund_amount IS NULL OR (stripe_refund_amount > 0 AND stripe_refund_id IS NOT NULL)) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_refund_amount_of_refund;

-- +goose Down
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_refund_amount_of_refund;
ALTER TABLE rides DROP COLUMN IF EXISTS stripe_refund_amount;
