package models

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RideClaimForCancel queues on batch the claim of a ride by the cancel request of key keyID. The
// claim is what makes a second cancel, under another key, answer ride_already_cancelled rather
// than refund again: two cancels of one ride both write its row, so under SERIALIZABLE one of
// them retries and finds the other's claim.
func RideClaimForCancel(batch *pgx.Batch, userID, id, keyID int64) {
	batch.Queue(`
		UPDATE rides
		SET cancel_idempotency_key_id = $2
		WHERE user_id = $3 AND id = $1`, id, keyID, userID,
	).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("error claiming ride %d for cancel: %w", id, ErrNotFound)
		}
		return nil
	})
}

// RideRecordRefund queues on batch the recording of the refund our cancel made and the amount
// it gave back: the ride is cancelled, unless a state of higher precedence (a dispute) got there
// first.
func RideRecordRefund(batch *pgx.Batch, userID, id int64, refundID string, amount int64) {
	batch.Queue(`
		UPDATE rides
		SET stripe_refund_id = $2, stripe_refund_amount = $4,
			status = CASE WHEN `+rideStatusRank("status")+` < `+rideStatusRank("'cancelled'")+`
				THEN 'cancelled' ELSE status END
		WHERE user_id = $3 AND id = $1`, id, refundID, userID, amount,
	).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("error recording refund of ride %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// RideRaiseStatusByID queues on batch the move of ride id to status, if status outranks the one
// it has (see RideStatus).
func RideRaiseStatusByID(batch *pgx.Batch, userID, id int64, status RideStatus) {
	batch.Queue(rideRaiseStatus, userID, id, status)
}

// rideRaiseStatus moves ride ($1, $2) to status $3 if that outranks the status it has.
var rideRaiseStatus = `
	UPDATE rides
	SET status = $3
	WHERE user_id = $1 AND id = $2 AND ` + rideStatusRank("status") + ` < ` + rideStatusRank("$3::text")

// RideRaiseStatus moves the ride charged with chargeID to status, if status outranks the one it
// has (see RideStatus). It returns the ride's id, or ErrNotFound when no ride has that charge;
// raised is false when the ride already stood at status or above. A charge id names no rider, so
// the ride is found first (on Citus, on every shard), then written through its rider.
func RideRaiseStatus(ctx context.Context, db DBTX, chargeID string, status RideStatus) (id int64, raised bool, err error) {
	var userID int64
	if err := db.QueryRow(ctx, `SELECT user_id, id FROM rides WHERE stripe_charge_id = $1`, chargeID).Scan(&userID, &id); err != nil {
		return 0, false, fmt.Errorf("error finding the ride charged %s: %w", chargeID, notFound(err))
	}
	tag, err := db.Exec(ctx, rideRaiseStatus, userID, id, status)
	if err != nil {
		return 0, false, fmt.Errorf("error setting status of ride %d: %w", id, err)
	}
	return id, tag.RowsAffected() == 1, nil
}

// RideListByStripeChargeIDs returns the rides charged with any of chargeIDs. A charge id names no
// rider, so on Citus it asks every shard.
func RideListByStripeChargeIDs(ctx context.Context, db DBTX, chargeIDs []string) ([]*Ride, error) {
	rows, _ := db.Query(ctx, `SELECT `+rideColumns+` FROM rides WHERE stripe_charge_id = ANY($1)`, chargeIDs)
	rides, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Ride, error) { return scanRide(row) })
	if err != nil {
		return nil, fmt.Errorf("error finding rides by charge: %w", err)
	}
	return rides, nil
}

// DisputedRide is a disputed ride, with when its dispute reached us.
type DisputedRide struct {
	*Ride
	DisputedAt *time.Time // when the charge.dispute.created event arrived; nil if no event names the ride
}

// RideListDisputed returns up to limit disputed rides, oldest first: the ones a person has to
// answer at Stripe's dashboard before the dispute's deadline. Two queries, the rides and then
// when their disputes arrived: on Citus the rides are distributed and stripe_events a plain table
// on the coordinator, which Citus does not join.
func RideListDisputed(ctx context.Context, db DBTX, limit int) ([]*DisputedRide, error) {
	rows, _ := db.Query(ctx, `
		SELECT `+rideColumns+`
		FROM rides
		WHERE status = 'disputed'
		ORDER BY created_at
		LIMIT $1`, limit)
	rides, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*DisputedRide, error) {
		ride, err := scanRide(row)
		return &DisputedRide{Ride: ride}, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing disputed rides: %w", err)
	}
	if len(rides) == 0 {
		return rides, nil
	}
	ids := make([]int64, len(rides))
	for i, d := range rides {
		ids[i] = d.ID
	}
	rows, _ = db.Query(ctx, `
		SELECT ride_id, min(received_at) FROM stripe_events
		WHERE ride_id = ANY($1) AND type = 'charge.dispute.created'
		GROUP BY ride_id`, ids)
	disputedAt := map[int64]time.Time{}
	var rideID int64
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&rideID, &at}, func() error {
		disputedAt[rideID] = at
		return nil
	}); err != nil {
		return nil, fmt.Errorf("error finding when disputes arrived: %w", err)
	}
	for _, d := range rides {
		if at, ok := disputedAt[d.ID]; ok {
			d.DisputedAt = &at
		}
	}
	return rides, nil
}

// RideRefundReceiptRecord records that the refund receipt of a ride was sent with messageID, as
// RideReceiptRecord does for the ride's receipt: only the first, ErrNotFound after that.
func RideRefundReceiptRecord(ctx context.Context, db DBTX, userID, rideID int64, messageID string) (*RideReceipt, error) {
	var r RideReceipt
	err := db.QueryRow(ctx, `
		UPDATE rides
		SET refund_receipt_sent_at = now(), refund_receipt_message_id = $2
		WHERE user_id = $3 AND id = $1 AND refund_receipt_sent_at IS NULL AND stripe_refund_id IS NOT NULL
		RETURNING id, refund_receipt_message_id, refund_receipt_sent_at`, rideID, messageID, userID).
		Scan(&r.RideID, &r.MessageID, &r.SentAt)
	if err != nil {
		return nil, fmt.Errorf("error recording refund receipt of ride %d: %w", rideID, notFound(err))
	}
	return &r, nil
}

// RideIDOfKey returns the ride a request worked on: the one its key booked, or the one its key
// cancels. ErrNotFound when there is none (a booking that stopped before its ride, a cancel
// of no ride of the rider's).
func RideIDOfKey(ctx context.Context, db DBTX, userID, keyID int64) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `
		SELECT id FROM rides WHERE user_id = $2 AND (idempotency_key_id = $1 OR cancel_idempotency_key_id = $1)
		LIMIT 1`, keyID, userID).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("error getting ride of idempotency key %d: %w", keyID, notFound(err))
	}
	return id, nil
}
