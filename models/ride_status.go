package models

// A ride's status, and the queries that raise it or list rides by it: Stripe's webhooks raise
// a ride's status through its charge, and an operator lists the disputed rides.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// RideStatus is what became of a ride's charge after the booking.
type RideStatus string

// The statuses of a ride, in order of precedence. A ride only ever moves to a status of higher
// precedence (RideRaiseStatus). Stripe sends its webhooks in no particular order, so this is what
// makes them leave a ride the same whatever order they arrive in. Our own cancel outranks a
// refund Stripe reports, because that refund was ours. A dispute outranks everything, because a
// person must answer it. Nothing moves a declined ride on: it has no charge for an event or a
// cancel to name.
const (
	RideStatusBooked    RideStatus = "booked"    // charged, or the charge not answered yet
	RideStatusDeclined  RideStatus = "declined"  // Stripe refused the booking's charge for good
	RideStatusRefunded  RideStatus = "refunded"  // refunded in full from Stripe's dashboard
	RideStatusCancelled RideStatus = "cancelled" // cancelled by the rider and refunded by us
	RideStatusDisputed  RideStatus = "disputed"  // the rider's bank disputes the charge
)

var rideStatusOrder = []RideStatus{RideStatusBooked, RideStatusDeclined, RideStatusRefunded, RideStatusCancelled, RideStatusDisputed}

// Raise returns whichever of s and to has the higher precedence: the status a ride at s moves
// to when to is reported.
func (s RideStatus) Raise(to RideStatus) RideStatus {
	if slices.Index(rideStatusOrder, to) > slices.Index(rideStatusOrder, s) {
		return to
	}
	return s
}

// rideStatusRank returns the SQL for the precedence of s, an SQL expression of a status.
func rideStatusRank(s string) string {
	return `array_position(ARRAY['booked', 'declined', 'refunded', 'cancelled', 'disputed'], ` + s + `)`
}

// RideRaiseStatusByID queues on batch the move of a ride to status, if status outranks the one
// it has (see RideStatus).
func RideRaiseStatusByID(batch *pgx.Batch, userID, id int64, status RideStatus) {
	batch.Queue(rideRaiseStatus, userID, id, status)
}

var rideRaiseStatus = `
	UPDATE rides
	SET status = $3
	WHERE user_id = $1 AND id = $2 AND ` + rideStatusRank("status") + ` < ` + rideStatusRank("$3::text")

// RideRaiseStatus moves the ride charged with chargeID to status, if status outranks the one it
// has (see RideStatus). It returns the ride's id, or ErrNotFound when no ride has that charge.
// raised is false when the ride already stood at status or above. A charge id names no rider,
// so the first query finds the ride (on Citus, on every shard) and the second writes it through
// its rider.
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

// DisputedRide is a disputed ride and the time its dispute reached us.
type DisputedRide struct {
	*Ride
	DisputedAt *time.Time // when the charge.dispute.created event arrived; nil if no event names the ride
}

// RideListDisputed returns up to limit disputed rides, oldest first. A person has to answer each
// at Stripe's dashboard before the dispute's deadline. It reads the rides first and then when
// their disputes arrived, in two queries: on Citus, rides is distributed and stripe_events is a
// plain table on the coordinator, and Citus does not join the two.
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
