package models

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// StripeEventRecord records Stripe's event id, of type eventType and created at created, in the
// transaction that applies it. It reports false when the event was recorded before: Stripe
// repeated a delivery, which must change nothing. Two deliveries of one event at once wait on
// each other at the primary key, and the second reports false once the first commits.
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

// StripeEventKeep keeps event id, already recorded by StripeEventRecord, for chargeID, a charge
// that no ride records yet. status is the ride status the event reports. The transaction that
// later records the charge on its ride applies it. Only kept events enter the index that every
// booking reads, so that a webhook for a charge a ride already records never writes where a
// booking reads.
func StripeEventKeep(ctx context.Context, db DBTX, id, chargeID string, status RideStatus) error {
	tag, err := db.Exec(ctx, `UPDATE stripe_events SET charge_id = $2, ride_status = $3 WHERE id = $1`,
		id, chargeID, string(status))
	if err != nil {
		return fmt.Errorf("error keeping Stripe event %s for charge %s: %w", id, chargeID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("error keeping Stripe event %s for charge %s: %w", id, chargeID, ErrNotFound)
	}
	return nil
}

// StripeEventSetRide records which ride an event changed. The event is no longer kept.
func StripeEventSetRide(ctx context.Context, db DBTX, id string, rideID int64) error {
	if _, err := db.Exec(ctx, `UPDATE stripe_events SET ride_id = $2 WHERE id = $1`, id, rideID); err != nil {
		return fmt.Errorf("error recording ride of Stripe event %s: %w", id, err)
	}
	return nil
}

// KeptStripeEvent is an event that came before any ride recorded its charge. It is kept for the
// transaction that records the charge, which applies it.
type KeptStripeEvent struct {
	ID       string
	ChargeID string
	Status   RideStatus
}

// StripeEventsKeptFor queues on batch the read of the events kept for chargeID. It appends them
// to kept once the batch has run.
func StripeEventsKeptFor(batch *pgx.Batch, chargeID string, kept *[]KeptStripeEvent) {
	batch.Queue(`
		SELECT id, ride_status FROM stripe_events
		WHERE charge_id = $1 AND ride_id IS NULL`, chargeID,
	).Query(func(rows pgx.Rows) error {
		event := KeptStripeEvent{ChargeID: chargeID}
		_, err := pgx.ForEachRow(rows, []any{&event.ID, &event.Status}, func() error {
			*kept = append(*kept, event)
			return nil
		})
		if err != nil {
			return fmt.Errorf("error reading Stripe events kept for charge %s: %w", chargeID, err)
		}
		return nil
	})
}

// StripeEventsSetRide queues on batch what StripeEventSetRide does, for each of the events ids.
func StripeEventsSetRide(batch *pgx.Batch, ids []string, rideID int64) {
	batch.Queue(`UPDATE stripe_events SET ride_id = $2 WHERE id = ANY($1)`, ids, rideID).
		Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(len(ids)) {
				return fmt.Errorf("error recording ride %d of Stripe events %v: %w", rideID, ids, ErrNotFound)
			}
			return nil
		})
}

// KeptStripeEventCursor is where a listing of kept events stopped: the time the last event it
// returned was received, and its id. The zero cursor starts from the first.
type KeptStripeEventCursor struct {
	ReceivedAt time.Time
	ID         string
}

// StripeEventListKept returns up to limit kept events received within the last receivedWithin,
// oldest first, starting after after, and the cursor of the next page. Paging on
// (received_at, id) reaches every kept event, however many older ones stay kept for good (say,
// for a charge of another integration on the same Stripe account, which no ride ever records).
func StripeEventListKept(ctx context.Context, db DBTX, receivedWithin time.Duration, after KeptStripeEventCursor, limit int) ([]KeptStripeEvent, KeptStripeEventCursor, error) {
	rows, _ := db.Query(ctx, `
		SELECT id, charge_id, ride_status, received_at FROM stripe_events
		WHERE ride_id IS NULL AND charge_id IS NOT NULL
			AND received_at > now() - make_interval(secs => $1)
			AND (received_at, id) > ($2, $3)
		ORDER BY received_at, id
		LIMIT $4`, receivedWithin.Seconds(), after.ReceivedAt, after.ID, limit)
	var (
		kept  []KeptStripeEvent
		event KeptStripeEvent
		next  = after
	)
	_, err := pgx.ForEachRow(rows, []any{&event.ID, &event.ChargeID, &event.Status, &next.ReceivedAt}, func() error {
		kept = append(kept, event)
		next.ID = event.ID
		return nil
	})
	if err != nil {
		return nil, after, fmt.Errorf("error listing kept Stripe events: %w", err)
	}
	return kept, next, nil
}
