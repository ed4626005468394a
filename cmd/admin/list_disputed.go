package main

import (
	"context"
	"strconv"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// listDisputed shows the rides whose charge the rider's bank disputes, oldest first. Each is
// answered at Stripe's dashboard, with the evidence the ride's record gives, before the
// dispute's deadline.
func listDisputed(ctx context.Context, args []string) error {
	return runList(ctx, "list-disputed", args, "the oldest", models.RideListDisputed, disputedFormat)
}

var disputedFormat = listFormat[*models.DisputedRide]{
	noun:   "disputed ride",
	id:     func(r *models.DisputedRide) any { return r.ID },
	header: []string{"RIDE", "USER", "CHARGE", "REFUND", "BOOKED", "DISPUTED"},
	cells:  disputedCells,
	object: disputedObject,
}

// disputedRideJSON is how list-disputed -json shows one disputed ride.
type disputedRideJSON struct {
	RideID         int64      `json:"ride_id,string"`
	UserID         int64      `json:"user_id"`
	StripeChargeID *string    `json:"stripe_charge_id"`
	StripeRefundID *string    `json:"stripe_refund_id"`
	BookedAt       time.Time  `json:"booked_at"`
	DisputedAt     *time.Time `json:"disputed_at"`
}

func disputedObject(r *models.DisputedRide) any {
	out := disputedRideJSON{RideID: r.ID, UserID: r.UserID, StripeChargeID: r.StripeChargeID,
		StripeRefundID: r.StripeRefundID, BookedAt: r.CreatedAt.UTC()}
	if r.DisputedAt != nil {
		at := r.DisputedAt.UTC()
		out.DisputedAt = &at
	}
	return out
}

func disputedCells(r *models.DisputedRide) []string {
	refund, disputed := "-", "-"
	if r.StripeRefundID != nil {
		refund = *r.StripeRefundID
	}
	if r.DisputedAt != nil {
		disputed = r.DisputedAt.UTC().Format(time.RFC3339)
	}
	return []string{strconv.FormatInt(r.ID, 10), strconv.FormatInt(r.UserID, 10), *r.StripeChargeID,
		refund, r.CreatedAt.UTC().Format(time.RFC3339), disputed}
}
