package models

import (
	"context"
	"fmt"
	"time"
)

// StripeEventRecord records that the Stripe event id, of type eventType and created at created,
// is being applied, in the transaction that applies it. It reports false when the event was
// recorded before: a delivery Stripe repeated, which must change nothing. Two deliveries of one
// event at once wait on each other at the primary key, and the second reports false once the
// first commits.
func StripeEventRecord(ctx context.Context, db DBTX, id, eventType string, created time.Time) (bool, error) {
	tag, err := db.Exec(ctx, `
		INSERT INTO stripe_events (id, type, created_at)
		VALUES ($1, $2, $3)
		ON CONFLICT (id) DO NOTHING`, id, eventType, created)
	if err != nil {
		return false, fmt.Errorf("error recording Stripe event %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// StripeEventSetRide records which ride an event changed.
func StripeEventSetRide(ctx context.Context, db DBTX, id string, rideID int64) error {
	if _, err := db.Exec(ctx, `UPDATE stripe_events SET ride_id = $2 WHERE id = $1`, id, rideID); err != nil {
		return fmt.Errorf("error recording ride of Stripe event %s: %w", id, err)
	}
	return nil
}
