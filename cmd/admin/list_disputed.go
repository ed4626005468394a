package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

// listDisputed shows the rides whose charge the rider's bank disputes, oldest first: each is
// answered at Stripe's dashboard, with the evidence the ride's record gives, before the
// dispute's deadline. A table by default; -json prints one object per line.
func listDisputed(ctx context.Context, args []string) error {
	return runList(ctx, "list-disputed", args, "the oldest", models.RideListDisputed,
		writeDisputedTable, writeDisputedJSON)
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

func writeDisputedJSON(w io.Writer, rides []*models.DisputedRide) error {
	enc := json.NewEncoder(w)
	for _, r := range rides {
		out := disputedRideJSON{RideID: r.ID, UserID: r.UserID, StripeChargeID: r.StripeChargeID,
			StripeRefundID: r.StripeRefundID, BookedAt: r.CreatedAt.UTC()}
		if r.DisputedAt != nil {
			at := r.DisputedAt.UTC()
			out.DisputedAt = &at
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("error writing disputed ride %d: %w", r.ID, err)
		}
	}
	return nil
}

func writeDisputedTable(w io.Writer, rides []*models.DisputedRide) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RIDE\tUSER\tCHARGE\tREFUND\tBOOKED\tDISPUTED")
	for _, r := range rides {
		refund, disputed := "-", "-"
		if r.StripeRefundID != nil {
			refund = *r.StripeRefundID
		}
		if r.DisputedAt != nil {
			disputed = r.DisputedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", strconv.FormatInt(r.ID, 10), r.UserID, *r.StripeChargeID,
			refund, r.CreatedAt.UTC().Format(time.RFC3339), disputed)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("error writing disputed rides: %w", err)
	}
	return nil
}
