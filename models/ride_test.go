package models_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/models"
)

// TestRideWrites checks the queued writes of a ride: each writes the ride it names, and fails
// with ErrNotFound on a ride that does not exist, which fails the whole batch.
func TestRideWrites(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		queue func(batch *pgx.Batch, userID, id, keyID int64)
		check string // SQL that is true of the ride once written
	}{
		{"SetStripeChargeID", func(batch *pgx.Batch, userID, id, keyID int64) {
			models.RideSetStripeChargeID(batch, userID, id, "ch_1")
		}, `stripe_charge_id = 'ch_1'`},
		{"ClaimForCancel", func(batch *pgx.Batch, userID, id, keyID int64) {
			models.RideClaimForCancel(batch, userID, id, keyID)
		}, `cancel_idempotency_key_id = idempotency_key_id`},
		{"RecordRefund", func(batch *pgx.Batch, userID, id, keyID int64) {
			models.RideRecordRefund(batch, userID, id, "re_1", 500)
		}, `stripe_refund_id = 're_1' AND stripe_refund_amount = 500 AND status = 'cancelled'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := dbtest.NewPool(t)
			params, _ := insertKey(t, pool, models.IdempotencyKeyProgress{RecoveryPoint: models.RecoveryPointStarted}, 0)
			ride := &models.Ride{ID: models.NewID(), IdempotencyKeyID: &params.ID, UserID: params.UserID}
			batch := &pgx.Batch{}
			models.RideInsert(batch, ride)
			models.RideSetStripeChargeID(batch, ride.UserID, ride.ID, "ch_booked") // a refund needs a charge
			if err := pool.SendBatch(ctx, batch).Close(); err != nil {
				t.Fatal(err)
			}

			batch = &pgx.Batch{}
			tt.queue(batch, ride.UserID, ride.ID+1, params.ID)
			if err := pool.SendBatch(ctx, batch).Close(); !errors.Is(err, models.ErrNotFound) {
				t.Fatalf("want ErrNotFound for a ride that does not exist, got %v", err)
			}

			// The cancel's claim names a key: the ride's own will do.
			batch = &pgx.Batch{}
			tt.queue(batch, ride.UserID, ride.ID, params.ID)
			if err := pool.SendBatch(ctx, batch).Close(); err != nil {
				t.Fatal(err)
			}
			var written bool
			if err := pool.QueryRow(ctx, `SELECT `+tt.check+` FROM rides WHERE id = $1`, ride.ID).Scan(&written); err != nil || !written {
				t.Fatalf("want the ride written (%s), got %t (%v)", tt.check, written, err)
			}
		})
	}
}
