-- Where the worker records that a ride's receipt was mailed. It is written in the same
-- transaction that completes the receipt job, so a ride whose receipt is recorded is never
-- mailed again, whatever jobs for it come later.

-- +goose Up
ALTER TABLE rides
    -- When the receipt was handed to the mail server; NULL until then.
    ADD COLUMN receipt_sent_at    timestamptz,

    -- The Message-ID the receipt was sent with, which a mail system downstream deduplicates
    -- on, and which support can search a mailbox for.
    ADD COLUMN receipt_message_id text
        CHECK (char_length(receipt_message_id) BETWEEN 3 AND 255),

    ADD CONSTRAINT rides_receipt_recorded_whole
        CHECK ((receipt_sent_at IS NULL) = (receipt_message_id IS NULL)),

    -- A receipt says what was charged; a ride that was not charged has none.
    ADD CONSTRAINT rides_receipt_needs_charge
        CHECK (receipt_sent_at IS NULL OR stripe_charge_id IS NOT NULL);

-- +goose Down
ALTER TABLE rides
    DROP CONSTRAINT rides_receipt_needs_charge,
    DROP CONSTRAINT rides_receipt_recorded_whole,
    DROP COLUMN receipt_message_id,
    DROP COLUMN receipt_sent_at;
