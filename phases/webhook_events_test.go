package phases

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
)

// lastStripeEvent is the last event the stand-in emitted, as the webhook reads it; it must be of
// type eventType.
func (b *testBundle) lastStripeEvent(t *testing.T, eventType string) *stripe.Event {
	t.Helper()
	events := b.Stripe.WebhookEvents()
	if len(events) == 0 || events[len(events)-1].Type != eventType {
		t.Fatalf("want the stand-in's last event a %s, got %+v", eventType, events)
	}
	var event stripe.Event
	if err := json.Unmarshal(events[len(events)-1].Payload, &event); err != nil {
		t.Fatal(err)
	}
	return &event
}

// requireEventOfRide checks that event was applied to ride: it names the ride, and is no
// longer kept.
func (b *testBundle) requireEventOfRide(t *testing.T, event *stripe.Event, rideID int64) {
	t.Helper()
	if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE id = $1 AND ride_id = $2`, event.ID, rideID); n != 1 {
		t.Fatalf("want event %s to name ride %d, got %d rows", event.ID, rideID, n)
	}
}

// failFirstCommitOfEventApplied has the first COMMIT that names a ride in a kept event fail with
// a serialization failure, as a concurrent transaction can make it fail, so that its phase
// retries; every later COMMIT goes through.
func (b *testBundle) failFirstCommitOfEventApplied(t *testing.T) {
	t.Helper()
	b.Exec(t, `CREATE SEQUENCE fail_once`)
	b.Exec(t, `CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('fail_once') = 1 THEN
				RAISE EXCEPTION 'the first COMMIT fails' USING ERRCODE = '40001';
			END IF;
			RETURN NULL;
		END $$`)
	b.Exec(t, `CREATE CONSTRAINT TRIGGER fail_once AFTER UPDATE OF ride_id ON stripe_events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_once()`)
}

// refundKeptBeforeItsCharge plays a booking whose charge's answer was lost, leaving its key at
// ride_created, and a full refund of that charge reported before any retry: the refund comes
// kept. It returns the key and the refund's event.
func (b *testBundle) refundKeptBeforeItsCharge(t *testing.T) (*models.IdempotencyKey, *stripe.Event) {
	t.Helper()
	ctx := t.Context()
	b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
	executor := New(b.Pool, b.FreshConnStripeClient(), b.executor.logger, b.executor.config)
	var unavailable *PaymentUnavailableError
	if _, err := executor.CreateRide(ctx, newRequest(b.Rider)); !errors.As(err, &unavailable) {
		t.Fatalf("want the charge's answer lost, got %v", err)
	}
	key := b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)

	charges := b.SucceededCharges()
	if len(charges) != 1 {
		t.Fatalf("want the charge made, got %d", len(charges))
	}
	if _, err := b.Stripe.RefundCharge(charges[0].ID); err != nil {
		t.Fatal(err)
	}
	event := b.lastStripeEvent(t, fakestripe.EventChargeRefunded)
	if result, _, err := b.executor.ApplyStripeEvent(ctx, event); err != nil || result != EventKept {
		t.Fatalf("want the refund kept, got %s, %v", result, err)
	}
	return key, event
}

func TestStripeEventBeforeItsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// The event's transaction and the one that records the charge run at once, each committing
	// what the other does not see: the second to commit retries and applies the event.
	t.Run("WhileTheChargeIsRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var event *stripe.Event
		b.executor.hooks.inPhase = func(ctx context.Context, tx models.DBTX, p models.RecoveryPoint) error {
			charges := b.SucceededCharges()
			if p != models.RecoveryPointRideCreated || len(charges) == 0 || event != nil {
				return nil
			}
			// Atomic phase 2 takes its snapshot, then the dispute is applied and committed.
			var one int
			if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				return err
			}
			if _, err := b.Stripe.DisputeCharge(charges[0].ID); err != nil {
				return err
			}
			event = b.lastStripeEvent(t, fakestripe.EventChargeDisputeCreated)
			result, rideID, err := b.executor.ApplyStripeEvent(ctx, event)
			if err != nil || result != EventKept || rideID != 0 {
				t.Errorf("want the dispute kept, got %s for ride %d, %v", result, rideID, err)
			}
			return nil
		}
		ride := b.requireCreate(t, newRequest(b.Rider)).Ride
		if event == nil {
			t.Fatal("want the dispute sent while the charge was recorded")
		}
		b.requireStatus(t, ride.ID, models.RideStatusDisputed)
		b.requireEventOfRide(t, event, ride.ID)
		b.requireOneChargedRide(t, b.Rider)
	})

	// Every booking reads the index of kept events for its charge (SERIALIZABLE: a predicate
	// lock on its one small page). A refund of a charge that a ride records writes nothing there,
	// so that it never conflicts with a booking; only a kept event does. An empty b-tree is its
	// metapage alone; the first entry adds a page.
	t.Run("OnlyKeptEventsEnterTheIndexBookingsRead", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keptIndexPages := func() int {
			return b.Count(t, `SELECT (pg_relation_size('stripe_events_kept_charge_id') / current_setting('block_size')::int)::int`)
		}
		ride := b.bookedRide(t, b.Rider)
		if _, err := b.Stripe.RefundCharge(*ride.StripeChargeID); err != nil {
			t.Fatal(err)
		}
		event := b.lastStripeEvent(t, fakestripe.EventChargeRefunded)
		if result, rideID, err := b.executor.ApplyStripeEvent(ctx, event); err != nil || result != EventApplied || rideID != ride.ID {
			t.Fatalf("want the refund applied to ride %d, got %s for ride %d, %v", ride.ID, result, rideID, err)
		}
		b.requireStatus(t, ride.ID, models.RideStatusRefunded)
		if n := keptIndexPages(); n != 1 {
			t.Fatalf("want the index of kept events untouched (its metapage alone), got %d pages", n)
		}

		event.ID, event.Data.Raw = "evt_of_a_charge_to_come", []byte(`{"id": "ch_to_come", "object": "charge", "refunded": true}`)
		if result, _, err := b.executor.ApplyStripeEvent(ctx, event); err != nil || result != EventKept {
			t.Fatalf("want the refund of a charge to come kept, got %s, %v", result, err)
		}
		if n := keptIndexPages(); n != 2 {
			t.Fatalf("want the kept event in the index of kept events, got %d pages", n)
		}
	})

	// The completer resumes the booking whose charge's answer was lost, after the refund came.
	t.Run("AppliedByTheCompleter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key, event := b.refundKeptBeforeItsCharge(t)
		// Stripe's repeat of it, before the ride records the charge, is a repeat all the same.
		if result, _, err := b.executor.ApplyStripeEvent(ctx, event); err != nil || result != EventDuplicate {
			t.Fatalf("want the repeat a duplicate, got %s, %v", result, err)
		}

		outcome, err := b.executor.Resume(ctx, b.Rider.User, key)
		requireCreated(t, outcome, err)
		rideID, err := models.RideIDOfKey(ctx, b.Pool, b.Rider.ID, key.ID)
		if err != nil {
			t.Fatal(err)
		}
		b.requireStatus(t, rideID, models.RideStatusRefunded)
		b.requireEventOfRide(t, event, rideID)
	})

	// The transaction that records the charge and applies the kept refund fails at its COMMIT
	// and retries: the retry applies the refund again.
	t.Run("AppliedByTheRetryOfAFailedCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key, event := b.refundKeptBeforeItsCharge(t)
		b.failFirstCommitOfEventApplied(t)

		outcome, err := b.executor.Resume(ctx, b.Rider.User, key)
		requireCreated(t, outcome, err)
		if n := b.Count(t, `SELECT count(*) FROM fail_once WHERE last_value = 2`); n != 1 {
			t.Fatal("want the first COMMIT failed and the retry committed")
		}
		rideID, err := models.RideIDOfKey(ctx, b.Pool, b.Rider.ID, key.ID)
		if err != nil {
			t.Fatal(err)
		}
		b.requireStatus(t, rideID, models.RideStatusRefunded)
		b.requireEventOfRide(t, event, rideID)
	})

	// The completer's pass applies a kept dispute and fails at its COMMIT: its retry applies it
	// again.
	t.Run("AppliedByTheCompletersRetryOfAFailedCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status)
			VALUES ('evt_kept_dispute', 'charge.dispute.created', now(), $1, 'disputed')`, *ride.StripeChargeID)
		b.failFirstCommitOfEventApplied(t)

		applied, err := b.executor.ApplyKeptStripeEvents(ctx, time.Hour, 10)
		if err != nil || applied != 1 {
			t.Fatalf("want the dispute applied, got %d, %v", applied, err)
		}
		if n := b.Count(t, `SELECT count(*) FROM fail_once WHERE last_value = 2`); n != 1 {
			t.Fatal("want the first COMMIT failed and the retry committed")
		}
		b.requireStatus(t, ride.ID, models.RideStatusDisputed)
		if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE id = 'evt_kept_dispute' AND ride_id = $1`, ride.ID); n != 1 {
			t.Fatal("want the dispute to name the ride")
		}
	})

	// The completer's pass lists a kept dispute, and a record of the charge applies it before the
	// pass's transaction does: the pass's retry finds nothing kept and counts nothing.
	t.Run("TheCompletersPassCountsOnlyWhatItApplied", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status)
			VALUES ('evt_kept_dispute', 'charge.dispute.created', now(), $1, 'disputed')`, *ride.StripeChargeID)

		// What recordCharge does with a kept event, held open until the pass waits on it.
		record, err := b.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = record.Rollback(ctx) }()
		if _, err := record.Exec(ctx, `UPDATE rides SET status = 'disputed' WHERE id = $1`, ride.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := record.Exec(ctx, `UPDATE stripe_events SET ride_id = $1 WHERE id = 'evt_kept_dispute'`, ride.ID); err != nil {
			t.Fatal(err)
		}
		type passResult struct {
			applied int
			err     error
		}
		done := make(chan passResult, 1)
		go func() {
			applied, err := b.executor.ApplyKeptStripeEvents(ctx, time.Hour, 10)
			done <- passResult{applied, err}
		}()
		for b.Count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
			select {
			case res := <-done:
				t.Fatalf("want the pass to wait for the record, got %d applied, %v", res.applied, res.err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if err := record.Commit(ctx); err != nil {
			t.Fatal(err)
		}

		res := <-done
		if res.err != nil || res.applied != 0 {
			t.Fatalf("want the pass to count nothing applied, got %d, %v", res.applied, res.err)
		}
		b.requireStatus(t, ride.ID, models.RideStatusDisputed)
	})

	// The cancel's own refund is reported before the cancel records it: Stripe refunded, the
	// answer was lost, and the charge.refunded came. The ride, which records its charge, shows
	// refunded at once; the retry of the cancel records the refund, and cancelled outranks it.
	t.Run("RefundEventBeforeTheCancelRecordsIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ride := b.bookedRide(t, b.Rider)
		b.Stripe.InjectRefundFaults(fakestripe.FaultChargeThenDrop, 1)
		executor := New(b.Pool, b.FreshConnStripeClient(), b.executor.logger, b.executor.config)
		var unavailable *PaymentUnavailableError
		if _, err := executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey)); !errors.As(err, &unavailable) {
			t.Fatalf("want the refund's answer lost, got %v", err)
		}
		b.requireRefunds(t, *ride.StripeChargeID, 1)

		event := b.lastStripeEvent(t, fakestripe.EventChargeRefunded)
		if result, rideID, err := b.executor.ApplyStripeEvent(ctx, event); err != nil || result != EventApplied || rideID != ride.ID {
			t.Fatalf("want the refund applied to ride %d, got %s for ride %d, %v", ride.ID, result, rideID, err)
		}
		b.requireStatus(t, ride.ID, models.RideStatusRefunded)

		outcome, err := b.executor.CancelRide(ctx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)
		b.requireStatus(t, ride.ID, models.RideStatusCancelled)
		b.requireRefunds(t, *ride.StripeChargeID, 1)
	})
}
