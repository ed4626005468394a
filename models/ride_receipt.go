package models

import (
	"context"
	"fmt"
	"time"
)

// RideReceipt records that a ride's receipt was mailed. It lives in columns of rides (see
// migrations/00004_ride_receipts.sql) because a ride has at most one receipt.
type RideReceipt struct {
	RideID    int64
	MessageID string
	SentAt    time.Time
}

// RideReceiptGet returns the receipt recorded for a ride, or ErrNotFound if none was sent yet
// (or the ride does not exist).
func RideReceiptGet(ctx context.Context, db DBTX, rideID int64) (*RideReceipt, error) {
	var r RideReceipt
	err := db.QueryRow(ctx, `
		SELECT id, receipt_message_id, receipt_sent_at
		FROM rides
		WHERE id = $1 AND receipt_sent_at IS NOT NULL`, rideID).
		Scan(&r.RideID, &r.MessageID, &r.SentAt)
	if err != nil {
		return nil, fmt.Errorf("error getting receipt of ride %d: %w", rideID, notFound(err))
	}
	return &r, nil
}

// RideReceiptRecord records that the receipt of a ride was sent with messageID. It records only
// the first receipt: if one is recorded already, it changes nothing and returns ErrNotFound, so
// that the caller learns that another run got there first.
func RideReceiptRecord(ctx context.Context, db DBTX, rideID int64, messageID string) (*RideReceipt, error) {
	var r RideReceipt
	err := db.QueryRow(ctx, `
		UPDATE rides
		SET receipt_sent_at = now(), receipt_message_id = $2
		WHERE id = $1 AND receipt_sent_at IS NULL
		RETURNING id, receipt_message_id, receipt_sent_at`, rideID, messageID).
		Scan(&r.RideID, &r.MessageID, &r.SentAt)
	if err != nil {
		return nil, fmt.Errorf("error recording receipt of ride %d: %w", rideID, notFound(err))
	}
	return &r, nil
}
