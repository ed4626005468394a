package models

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RideStatus is what became of a ride's charge after the booking.
type RideStatus string

// The states of a ride, in order of precedence: a ride only ever moves to a state of higher
// precedence (RideRaiseStatus), so the webhooks that report them, which Stripe sends in no
// particular order, leave a ride the same whatever order they arrive in. Our own cancel outranks
// a refund Stripe reports (the refund was ours), and a dispute outranks everything, because a
// person must answer it. A declined ride has no charge for any event or cancel to name, so
// nothing moves it on.
const (
	RideStatusBooked    RideStatus = "booked"    // charged, or the charge not answered yet
	RideStatusDeclined  RideStatus = "declined"  // Stripe refused the booking's charge for good
	RideStatusRefunded  RideStatus = "refunded"  // refunded in full from Stripe's dashboard
	RideStatusCancelled RideStatus = "cancelled" // cancelled by the rider and refunded by us
	RideStatusDisputed  RideStatus = "disputed"  // the rider's bank disputes the charge
)

// rideStatusOrder is the states in order of precedence.
var rideStatusOrder = []RideStatus{RideStatusBooked, RideStatusDeclined, RideStatusRefunded, RideStatusCancelled, RideStatusDisputed}

// Raise returns the state of higher precedence of s and to: what a ride at s moves to when to
// is reported.
func (s RideStatus) Raise(to RideStatus) RideStatus {
	if slices.Index(rideStatusOrder, to) > slices.Index(rideStatusOrder, s) {
		return to
	}
	return s
}

// rideStatusRank is the SQL of a status's precedence, for a status expression s.
func rideStatusRank(s string) string {
	return `array_position(ARRAY['booked', 'declined', 'refunded', 'cancelled', 'disputed'], ` + s + `)`
}

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

	// StripeRefundID is the refund our cancel made, and StripeRefundAmount what it gave back (nil
	// on a refund recorded before migration 00013 or by the release before it, whose receipt
	// states the fare: too much, if part of the charge was refunded at the dashboard first);
	// CancelIdempotencyKeyID the key of the cancel request that claimed the ride (nil again once
	// the reaper recycled it).
	StripeRefundID         *string
	StripeRefundAmount     *int64
	CancelIdempotencyKeyID *int64

	// RefundReceiptSentAt is when the worker recorded the refund receipt as sent.
	RefundReceiptSentAt *time.Time
}

const rideColumns = `id, created_at, idempotency_key_id, origin_lat, origin_lon, target_lat,
	target_lon, stripe_charge_id, user_id, receipt_sent_at, status, stripe_refund_id,
	stripe_refund_amount, cancel_idempotency_key_id, refund_receipt_sent_at`

// scanRide reads a row of rideColumns, and into extra the columns a query selects after them.
func scanRide(row interface{ Scan(...any) error }, extra ...any) (*Ride, error) {
	var r Ride
	err := row.Scan(append([]any{&r.ID, &r.CreatedAt, &r.IdempotencyKeyID, &r.OriginLat, &r.OriginLon,
		&r.TargetLat, &r.TargetLon, &r.StripeChargeID, &r.UserID, &r.ReceiptSentAt, &r.Status,
		&r.StripeRefundID, &r.StripeRefundAmount, &r.CancelIdempotencyKeyID, &r.RefundReceiptSentAt}, extra...)...)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RideInsert queues on batch the insert of ride, a ride not charged yet, with the id and columns
// the caller set. ride.CreatedAt receives the database's time once the batch has run.
func RideInsert(batch *pgx.Batch, ride *Ride) {
	batch.Queue(`
		INSERT INTO rides (id, idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, user_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING created_at`,
		ride.ID, ride.IdempotencyKeyID, ride.OriginLat, ride.OriginLon, ride.TargetLat,
		ride.TargetLon, ride.UserID,
	).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&ride.CreatedAt); err != nil {
			return fmt.Errorf("error inserting ride %d: %w", ride.ID, err)
		}
		return nil
	})
}

// RideGetByIdempotencyKeyID finds the ride a request created, which is how a resumed request
// picks up where it left off. Returns ErrNotFound if there is none.
func RideGetByIdempotencyKeyID(ctx context.Context, db DBTX, userID, keyID int64) (*Ride, error) {
	ride, err := scanRide(db.QueryRow(ctx, `
		SELECT `+rideColumns+`
		FROM rides
		WHERE user_id = $1 AND idempotency_key_id = $2`, userID, keyID))
	if err != nil {
		return nil, fmt.Errorf("error getting ride of idempotency key %d: %w", keyID, notFound(err))
	}
	return ride, nil
}

// RideGetByIDForUser finds a ride that belongs to userID. Someone else's ride is ErrNotFound,
// so that callers cannot tell it from a ride that does not exist.
func RideGetByIDForUser(ctx context.Context, db DBTX, id, userID int64) (*Ride, error) {
	ride, err := scanRide(db.QueryRow(ctx, `
		SELECT `+rideColumns+`
		FROM rides
		WHERE id = $1 AND user_id = $2`, id, userID))
	if err != nil {
		return nil, fmt.Errorf("error getting ride %d: %w", id, notFound(err))
	}
	return ride, nil
}

// RideListForUser returns up to limit of a rider's rides, newest first (ties by id), and whether
// more follow: those after the ride startingAfter if it is not zero, which must be one of the
// rider's own (ErrNotFound otherwise). The index rides_user_id_created_at_id serves it.
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

// RideSetStripeChargeID queues on batch the recording of the charge that paid for a ride.
func RideSetStripeChargeID(batch *pgx.Batch, userID, id int64, chargeID string) {
	batch.Queue(`
		UPDATE rides
		SET stripe_charge_id = $2
		WHERE user_id = $3 AND id = $1`, id, chargeID, userID,
	).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("error setting charge of ride %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

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
func RideReceiptRecord(ctx context.Context, db DBTX, userID, rideID int64, messageID string) (*RideReceipt, error) {
	var r RideReceipt
	err := db.QueryRow(ctx, `
		UPDATE rides
		SET receipt_sent_at = now(), receipt_message_id = $2
		WHERE user_id = $3 AND id = $1 AND receipt_sent_at IS NULL
		RETURNING id, receipt_message_id, receipt_sent_at`, rideID, messageID, userID).
		Scan(&r.RideID, &r.MessageID, &r.SentAt)
	if err != nil {
		return nil, fmt.Errorf("error recording receipt of ride %d: %w", rideID, notFound(err))
	}
	return &r, nil
}
