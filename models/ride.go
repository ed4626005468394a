package models

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Ride is one trip a rider booked. StripeChargeID is nil until the charge went through.
type Ride struct {
	ID               int64
	CreatedAt        time.Time
	IdempotencyKeyID *int64
	OriginLat        float64
	OriginLon        float64
	TargetLat        float64
	TargetLon        float64
	StripeChargeID   *string
	UserID           int64

	// ReceiptSentAt is when the worker recorded the ride's receipt as sent; nil until then.
	ReceiptSentAt *time.Time

	Status RideStatus

	// StripeRefundID is the refund our cancel made, and StripeRefundAmount what it gave back.
	// The amount is nil on a refund recorded before migration 00013, or by the release before
	// it; such a refund's receipt states the fare, which is too much if part of the charge was
	// refunded at Stripe's dashboard first. CancelIdempotencyKeyID is the key of the cancel that
	// claimed the ride; it turns nil again when the reaper deletes that key.
	StripeRefundID         *string
	StripeRefundAmount     *int64
	CancelIdempotencyKeyID *int64

	// RefundReceiptSentAt is when the worker recorded the refund receipt as sent.
	RefundReceiptSentAt *time.Time
}

const rideColumns = `id, created_at, idempotency_key_id, origin_lat, origin_lon, target_lat,
	target_lon, stripe_charge_id, user_id, receipt_sent_at, status, stripe_refund_id,
	stripe_refund_amount, cancel_idempotency_key_id, refund_receipt_sent_at`

// scanRide reads a row of rideColumns, a line of them to a line.
func scanRide(row interface{ Scan(...any) error }) (*Ride, error) {
	var r Ride
	if err := row.Scan(&r.ID, &r.CreatedAt, &r.IdempotencyKeyID, &r.OriginLat, &r.OriginLon, &r.TargetLat,
		&r.TargetLon, &r.StripeChargeID, &r.UserID, &r.ReceiptSentAt, &r.Status, &r.StripeRefundID,
		&r.StripeRefundAmount, &r.CancelIdempotencyKeyID, &r.RefundReceiptSentAt); err != nil {
		return nil, err
	}
	return &r, nil
}

// RideInsert queues on batch the insert of ride, not charged yet, with the id and the columns
// the caller set. ride.CreatedAt receives the database's time once the batch has run.
func RideInsert(batch *pgx.Batch, ride *Ride) {
	batch.Queue(`
		INSERT INTO rides (id, idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING created_at`,
		ride.ID, ride.IdempotencyKeyID, ride.OriginLat, ride.OriginLon, ride.TargetLat, ride.TargetLon, ride.UserID,
	).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&ride.CreatedAt); err != nil {
			return fmt.Errorf("error inserting ride %d: %w", ride.ID, err)
		}
		return nil
	})
}

// RideGetByIdempotencyKeyID finds the ride a booking created. A resumed booking reads it to
// pick up where it left off. It returns ErrNotFound if there is none.
func RideGetByIdempotencyKeyID(ctx context.Context, db DBTX, userID, keyID int64) (*Ride, error) {
	ride, err := scanRide(db.QueryRow(ctx, `
		SELECT `+rideColumns+` FROM rides
		WHERE user_id = $1 AND idempotency_key_id = $2`, userID, keyID))
	if err != nil {
		return nil, fmt.Errorf("error getting ride of idempotency key %d: %w", keyID, notFound(err))
	}
	return ride, nil
}

// RideIDOfKey returns the ride a request worked on: the ride its key booked, or the ride its
// key cancels. It returns ErrNotFound when there is none: a booking that stopped before it
// created its ride, or a cancel of a ride the rider does not have.
func RideIDOfKey(ctx context.Context, db DBTX, userID, keyID int64) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `
		SELECT id FROM rides WHERE user_id = $1 AND (idempotency_key_id = $2 OR cancel_idempotency_key_id = $2)
		LIMIT 1`, userID, keyID).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("error getting ride of idempotency key %d: %w", keyID, notFound(err))
	}
	return id, nil
}

// RideGetByIDForUser finds a ride of rider userID. Someone else's ride is ErrNotFound, so that
// a caller cannot tell it from a ride that does not exist.
func RideGetByIDForUser(ctx context.Context, db DBTX, id, userID int64) (*Ride, error) {
	ride, err := scanRide(db.QueryRow(ctx, `
		SELECT `+rideColumns+` FROM rides
		WHERE id = $1 AND user_id = $2`, id, userID))
	if err != nil {
		return nil, fmt.Errorf("error getting ride %d: %w", id, notFound(err))
	}
	return ride, nil
}

// RideListForUser returns up to limit of a rider's rides, newest first (ties by id), and whether
// more follow. A startingAfter other than zero lists the rides after that ride, which must be
// one of the rider's own (ErrNotFound otherwise). The index rides_user_id_created_at_id serves
// the query.
func RideListForUser(ctx context.Context, db DBTX, userID int64, limit int, startingAfter int64) ([]*Ride, bool, error) {
	if startingAfter != 0 {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM rides WHERE id = $1 AND user_id = $2)`,
			startingAfter, userID).Scan(&exists); err != nil {
			return nil, false, fmt.Errorf("error finding ride %d: %w", startingAfter, err)
		}
		if !exists {
			return nil, false, fmt.Errorf("error listing rides after ride %d: %w", startingAfter, ErrNotFound)
		}
	}
	// After a ride, the row comparison starts the index scan right past it.
	after := `AND (created_at, id) < (SELECT created_at, id FROM rides WHERE user_id = $1 AND id = $3)`
	args := []any{userID, limit + 1, startingAfter}
	if startingAfter == 0 {
		after, args = "", args[:2]
	}
	rows, err := db.Query(ctx, `
		SELECT `+rideColumns+`
		FROM rides
		WHERE user_id = $1 `+after+`
		ORDER BY created_at DESC, id DESC
		LIMIT $2`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("error listing rides: %w", err)
	}
	defer rows.Close()
	var rides []*Ride
	for rows.Next() {
		ride, err := scanRide(rows)
		if err != nil {
			return nil, false, fmt.Errorf("error listing rides: %w", err)
		}
		rides = append(rides, ride)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("error listing rides: %w", err)
	}
	if len(rides) > limit {
		return rides[:limit], true, nil
	}
	return rides, false, nil
}

// oneRide checks a queued write of one ride. A write that matched no row fails with ErrNotFound,
// wrapped in format, which takes the ride's id.
func oneRide(format string, id int64) func(pgconn.CommandTag) error {
	return func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf(format+": %w", id, ErrNotFound)
		}
		return nil
	}
}

// RideSetStripeChargeID queues on batch the recording of the charge that paid for a ride.
func RideSetStripeChargeID(batch *pgx.Batch, userID, id int64, chargeID string) {
	batch.Queue(`
		UPDATE rides
		SET stripe_charge_id = $3
		WHERE user_id = $1 AND id = $2`, userID, id, chargeID,
	).Exec(oneRide("error setting charge of ride %d", id))
}

// RideClaimForCancel queues on batch the claim of a ride by the cancel whose key is keyID. The
// claim makes a second cancel, under another key, answer ride_already_cancelled instead of
// refunding again. Two cancels of one ride both write its row, so under SERIALIZABLE one of them
// retries and finds the other's claim.
func RideClaimForCancel(batch *pgx.Batch, userID, id, keyID int64) {
	batch.Queue(`
		UPDATE rides
		SET cancel_idempotency_key_id = $3
		WHERE user_id = $1 AND id = $2`, userID, id, keyID,
	).Exec(oneRide("error claiming ride %d for cancel", id))
}

// RideRecordRefund queues on batch the record of the refund our cancel made and the amount it
// gave back. The ride becomes cancelled, unless a status of higher precedence (a dispute) got
// there first.
func RideRecordRefund(batch *pgx.Batch, userID, id int64, refundID string, amount int64) {
	batch.Queue(`
		UPDATE rides
		SET stripe_refund_id = $3, stripe_refund_amount = $4,
			status = CASE WHEN `+rideStatusRank("status")+` < `+rideStatusRank("'cancelled'")+`
				THEN 'cancelled' ELSE status END
		WHERE user_id = $1 AND id = $2`, userID, id, refundID, amount,
	).Exec(oneRide("error recording refund of ride %d", id))
}

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
		UPDATE rides SET receipt_sent_at = now(), receipt_message_id = $3
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
