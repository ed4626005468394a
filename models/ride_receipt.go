package models

import (
	"context"
	"fmt"
	"time"
)

// RideReceipt records that a receipt of a ride was mailed: the ride's receipt after the
// booking, or the refund receipt after a cancel. Both live in columns of rides (see
// migrations/00004_ride_receipts.sql), because a ride has at most one of each.
type RideReceipt struct {
	RideID    int64
	MessageID string
	SentAt    time.Time
}

// scanRideReceipt reads a receipt's row: the ride's id, the receipt's Message-ID and when it was
// sent.
func scanRideReceipt(row interface{ Scan(...any) error }) (*RideReceipt, error) {
	var r RideReceipt
	if err := row.Scan(&r.RideID, &r.MessageID, &r.SentAt); err != nil {
		return nil, err
	}
	return &r, nil
}

// RideReceiptGet returns the receipt recorded for a ride. It returns ErrNotFound if none was
// sent yet, or the ride does not exist.
func RideReceiptGet(ctx context.Context, db DBTX, rideID int64) (*RideReceipt, error) {
	r, err := scanRideReceipt(db.QueryRow(ctx, `
		SELECT id, receipt_message_id, receipt_sent_at
		FROM rides
		WHERE id = $1 AND receipt_sent_at IS NOT NULL`, rideID))
	if err != nil {
		return nil, fmt.Errorf("error getting receipt of ride %d: %w", rideID, notFound(err))
	}
	return r, nil
}

// RideReceiptRecord records that the receipt of a ride was sent with messageID. Only the first
// receipt is recorded: if one is recorded already, it changes nothing and returns ErrNotFound,
// so that the caller learns another run got there first.
func RideReceiptRecord(ctx context.Context, db DBTX, userID, rideID int64, messageID string) (*RideReceipt, error) {
	r, err := scanRideReceipt(db.QueryRow(ctx, `
		UPDATE rides
		SET receipt_sent_at = now(), receipt_message_id = $3
		WHERE user_id = $1 AND id = $2 AND receipt_sent_at IS NULL
		RETURNING id, receipt_message_id, receipt_sent_at`, userID, rideID, messageID))
	if err != nil {
		return nil, fmt.Errorf("error recording receipt of ride %d: %w", rideID, notFound(err))
	}
	return r, nil
}

// RideRefundReceiptRecord records that the refund receipt of a refunded ride was sent with
// messageID. Like RideReceiptRecord, it records only the first and returns ErrNotFound after.
func RideRefundReceiptRecord(ctx context.Context, db DBTX, userID, rideID int64, messageID string) (*RideReceipt, error) {
	r, err := scanRideReceipt(db.QueryRow(ctx, `
		UPDATE rides
		SET refund_receipt_sent_at = now(), refund_receipt_message_id = $3
		WHERE user_id = $1 AND id = $2 AND refund_receipt_sent_at IS NULL AND stripe_refund_id IS NOT NULL
		RETURNING id, refund_receipt_message_id, refund_receipt_sent_at`, userID, rideID, messageID))
	if err != nil {
		return nil, fmt.Errorf("error recording refund receipt of ride %d: %w", rideID, notFound(err))
	}
	return r, nil
}
