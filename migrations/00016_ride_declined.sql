-- A ride whose charge Stripe refused for good (the booking's stored 402) is declined, not booked:
-- it stays as the record of the attempt, and a listing shows the rider what became of it. A
-- declined ride never has a charge, so no refund, dispute or cancel moves it on.
--
-- Each constraint is swapped in one statement (no moment without it) and added NOT VALID, then
-- validated apart (a scan that blocks no writes), so that bookings go on while it runs. Outside
-- a transaction, so that each statement holds its locks only while it runs; each is safe to run
-- again.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_status_known,
    ADD CONSTRAINT rides_status_known
        CHECK (status IN ('booked', 'declined', 'refunded', 'cancelled', 'disputed')) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_known;

-- Only a charged ride can be refunded, cancelled or disputed; a declined one has no charge.
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_status_needs_charge,
    ADD CONSTRAINT rides_status_needs_charge
        CHECK (status IN ('booked', 'declined') OR stripe_charge_id IS NOT NULL) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_needs_charge;
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_declined_has_no_charge,
    ADD CONSTRAINT rides_declined_has_no_charge
        CHECK (status <> 'declined' OR stripe_charge_id IS NULL) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_declined_has_no_charge;

-- The rides declined before: those whose booking's key still holds the 402 it stored, and those
-- whose key the reaper deleted (after IdempotencyKeyRetention) with no abandoned request naming
-- the ride. The reaper deletes only finished keys, or records an unfinished one as abandoned
-- first, and a booking that finished without a charge either stored a 402 or was recorded for
-- review: so a ride with neither a charge nor a record was declined. Row locks only, on the rides
-- it changes, which no request writes again. A ride that the release before this one declines
-- while a rolling deploy lasts stays booked, as it shows today; a cancel of it still answers
-- ride_not_charged, from its key.
UPDATE rides r SET status = 'declined'
WHERE r.status = 'booked' AND r.stripe_charge_id IS NULL
  AND (EXISTS (SELECT 1 FROM idempotency_keys k
               WHERE k.user_id = r.user_id AND k.id = r.idempotency_key_id
                 AND k.recovery_point = 'finished' AND k.response_code = 402)
    OR (r.idempotency_key_id IS NULL
        AND NOT EXISTS (SELECT 1 FROM abandoned_requests a WHERE a.user_id = r.user_id AND a.ride_id = r.id)));

-- +goose Down
-- The release before this one knows no declined ride: they show as booked again, as they did.
ALTER TABLE rides DROP CONSTRAINT IF EXISTS rides_declined_has_no_charge;
UPDATE rides SET status = 'booked' WHERE status = 'declined';
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_status_needs_charge,
    ADD CONSTRAINT rides_status_needs_charge
        CHECK (status = 'booked' OR stripe_charge_id IS NOT NULL) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_needs_charge;
ALTER TABLE rides
    DROP CONSTRAINT IF EXISTS rides_status_known,
    ADD CONSTRAINT rides_status_known
        CHECK (status IN ('booked', 'refunded', 'cancelled', 'disputed')) NOT VALID;
ALTER TABLE rides VALIDATE CONSTRAINT rides_status_known;
