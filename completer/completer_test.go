package completer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

func TestCompleterRunOnce(t *testing.T) {
	t.Parallel()

	t.Run("PushesIdleUnlockedKeyToFinished", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)

		b.runOnce(t, b.completer, Result{Succeeded: 1})
		b.requireFinishedCharged(t, key)
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want Stripe to hold 1 charge in all, got %d", n)
		}

		// Finished keys are not looked at again.
		b.runOnce(t, b.completer, Result{})
	})

	// On Citus the webhook can keep an event for a charge while a worker records it, neither
	// transaction seeing the other: the event is left kept, its ride charged. The pass applies it;
	// an event kept for a charge no ride records stays kept, and one received too long ago to
	// be of a ride still to be recorded is left alone.
	t.Run("AppliesStripeEventsKeptForARecordedCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rideID, chargeID := b.bookRide(t)
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status) VALUES
			('evt_kept_dispute', 'charge.dispute.created', now(), $1, 'disputed'),
			('evt_kept_refund', 'charge.refunded', now(), $1, 'refunded'),
			('evt_not_ours', 'charge.dispute.created', now(), 'ch_not_ours', 'disputed')`, chargeID)
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, received_at, charge_id, ride_status)
			VALUES ('evt_too_old', 'charge.dispute.created', now(), now() - interval '80 hours', 'ch_too_old', 'disputed')`)

		b.runOnce(t, b.completer, Result{StripeEventsApplied: 2})
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND status = 'disputed'`, rideID); n != 1 {
			t.Fatal("want the ride disputed")
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE ride_id = $1`, rideID); n != 2 {
			t.Fatalf("want both kept events to name the ride, got %d", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE ride_id IS NULL`); n != 2 {
			t.Fatalf("want the other events still kept, got %d", n)
		}
		b.runOnce(t, b.completer, Result{})
	})

	// Events kept for good (charges of another integration on the same Stripe account) are the
	// oldest, and more than a batch: the pass still reaches the one kept for a recorded charge.
	t.Run("AppliesKeptStripeEventsPastABatchOfUnmatchedOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rideID, chargeID := b.bookRide(t)
		const batchSize = 2
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, received_at, charge_id, ride_status)
			SELECT 'evt_not_ours_' || i, 'charge.dispute.created', now(), now() - interval '1 hour', 'ch_not_ours_' || i, 'disputed'
			FROM generate_series(1, $1::int) i`, 2*batchSize+1)
		b.Exec(t, `INSERT INTO stripe_events (id, type, created_at, charge_id, ride_status)
			VALUES ('evt_kept_dispute', 'charge.dispute.created', now(), $1, 'disputed')`, chargeID)
		c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{BatchSize: batchSize})

		b.runOnce(t, c, Result{StripeEventsApplied: 1})
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND status = 'disputed'`, rideID); n != 1 {
			t.Fatal("want the ride disputed")
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE ride_id IS NULL`); n != 2*batchSize+1 {
			t.Fatalf("want the unmatched events still kept, got %d", n)
		}
	})

	t.Run("EmptyDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.runOnce(t, b.completer, Result{})
	})

	t.Run("InternalErrorLeavesKeyForNextPass", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)

		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		b.runOnce(t, b.completer, Result{Failed: 1})
		after := b.reload(t, key)
		if after.RecoveryPoint != models.RecoveryPointRideCreated || after.LockedAt != nil || after.ResponseCode != nil {
			t.Fatalf("want key unlocked at ride_created with no response, got %s locked %v response %v",
				after.RecoveryPoint, after.LockedAt, after.ResponseCode)
		}
		if after.LastError == nil || !after.LastRunAt.After(key.LastRunAt) {
			t.Fatalf("want the failed run recorded (last_error, last_run_at), got %v %s", after.LastError, after.LastRunAt)
		}
		if n := len(b.SucceededCharges()); n != 0 {
			t.Fatalf("want no charge, got %d", n)
		}

		// Just run: left alone until it has been idle for IdleFor.
		b.runOnce(t, b.completer, Result{})

		// The cause is gone and the key has been idle long enough: the next pass finishes it.
		b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '2 minutes' WHERE id = $1`, key.ID)
		b.runOnce(t, b.completer, Result{Succeeded: 1})
		b.requireFinishedCharged(t, key)
	})

	t.Run("StaleLockIsTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
		// Its request died without unlocking: the lease ran out.
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '10 seconds', locked_until = now() - interval '1 second', lock_generation = lock_generation + 1 WHERE id = $1`, key.ID)

		b.runOnce(t, b.completer, Result{Succeeded: 1})
		b.requireFinishedCharged(t, key)
	})

	for _, tt := range []struct {
		name   string
		update string
	}{
		{"IgnoresKeyTooYoung", `created_at = now() - interval '4 minutes'`},
		{"IgnoresKeyRunRecently", `last_run_at = now() - interval '30 seconds'`},
		{"IgnoresKeyWithALiveLease", `locked_at = now() - interval '30 seconds', locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1`},
		{"IgnoresKeyLeftToTheReaper", `created_at = now() - interval '71 hours 1 minute'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
			b.Exec(t, `UPDATE idempotency_keys SET `+tt.update+` WHERE id = $1`, key.ID)
			key = b.reload(t, key)
			requests := b.Stripe.ChargeRequests()
			// Not even listed: a key whose run would only find it in use (a live lease) must not
			// cost a pass a try, nor its holder a lock taken from under it.
			c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{})
			c.beforeComplete = func() { t.Errorf("the completer took up key %d, which it must leave alone", key.ID) }

			b.runOnce(t, c, Result{})
			b.requireUntouched(t, key, requests)
		})
	}

	t.Run("IgnoresFinishedKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := newRequest(b.Rider)
		if _, err := b.executor.CreateRide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '1 hour', last_run_at = now() - interval '1 hour'`)
		key := b.key(t, b.Rider, req.IdempotencyKey)

		b.runOnce(t, b.completer, Result{})
		b.requireUntouched(t, key, 1)
	})

	// What a killed API leaves behind: a key at each recovery point, still locked by a process
	// that no longer exists. Each is finished with one Stripe charge overall, the one made before
	// the crash included.
	for _, point := range []models.RecoveryPoint{
		models.RecoveryPointStarted,
		models.RecoveryPointRideCreated,
		models.RecoveryPointChargeCreated,
	} {
		t.Run("FinishesKeyLeftAt_"+string(point), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			key := b.abandon(t, b.Rider, point)
			b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '10 seconds', locked_until = now() - interval '1 second', lock_generation = lock_generation + 1 WHERE id = $1`, key.ID)

			b.runOnce(t, b.completer, Result{Succeeded: 1})
			b.requireFinishedCharged(t, key)
			if n := len(b.SucceededCharges()); n != 1 {
				t.Fatalf("want Stripe to hold 1 charge in all, got %d", n)
			}
			if n := b.Count(t, `SELECT count(*) FROM audit_records WHERE user_id = $1`, b.Rider.ID); n != 1 {
				t.Fatalf("want 1 audit record, got %d", n)
			}
		})
	}

	t.Run("OneBadKeyDoesNotStopTheBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		gone, fine := b.NewRider(t, "tok_visa"), b.NewRider(t, "tok_visa")
		failing := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
		refused := b.abandon(t, gone, models.RecoveryPointRideCreated)
		finished := b.abandon(t, fine, models.RecoveryPointRideCreated)
		// Least recently run first: the failing key goes first and must not stop the others.
		b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '3 minutes' WHERE id = $1`, failing.ID)
		b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
		// This rider's Stripe customer has gone: Stripe refuses the charge for good, and the
		// request finishes with a stored 402. Finished is finished: that counts as succeeded.
		b.Exec(t, `UPDATE users SET stripe_customer_id = 'cus_gone' WHERE id = $1`, gone.ID)

		b.runOnce(t, b.completer, Result{Succeeded: 2, Failed: 1})

		if k := b.reload(t, failing); k.RecoveryPoint != models.RecoveryPointRideCreated || k.LockedAt != nil {
			t.Fatalf("want the failing key unlocked at ride_created, got %s locked %v", k.RecoveryPoint, k.LockedAt)
		}
		k := b.reload(t, refused)
		var p problem.Problem
		if k.RecoveryPoint != models.RecoveryPointFinished || *k.ResponseCode != 402 ||
			json.Unmarshal(k.ResponseBody, &p) != nil || p.Code != problem.CodePaymentRejected {
			t.Fatalf("want the refused key finished with 402 payment_rejected, got %s %v %s", k.RecoveryPoint, k.ResponseCode, k.ResponseBody)
		}
		b.requireFinishedCharged(t, finished)
	})

	t.Run("BatchIsBoundedLeastRecentlyRunFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		riders := []*ridetest.Rider{b.Rider, b.NewRider(t, "tok_visa"), b.NewRider(t, "tok_visa")}
		keys := make([]*models.IdempotencyKey, len(riders))
		for i, rider := range riders {
			keys[i] = b.abandon(t, rider, models.RecoveryPointRideCreated)
			b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - make_interval(mins => $2::int) WHERE id = $1`, keys[i].ID, 10-i)
		}
		c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{BatchSize: 2})

		b.runOnce(t, c, Result{Succeeded: 2})
		if k := b.reload(t, keys[2]); k.RecoveryPoint != models.RecoveryPointRideCreated {
			t.Fatalf("want the most recently run key left for the next pass, got %s", k.RecoveryPoint)
		}
		b.runOnce(t, c, Result{Succeeded: 1})
		for _, key := range keys {
			b.requireFinishedCharged(t, key)
		}
	})

	// A key whose lease another request takes between the completer's listing and its lock is
	// in use: the lock taken in the first phase refuses it. That is not a failure of the key,
	// so it is not counted.
	t.Run("KeyTakenAfterListingIsSkipped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
		requests := b.Stripe.ChargeRequests()
		c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{})
		var taken *models.IdempotencyKey
		c.beforeComplete = func() {
			b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '30 seconds', locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1 WHERE id = $1`, key.ID)
			taken = b.reload(t, key)
		}

		b.runOnce(t, c, Result{})
		b.requireUntouched(t, taken, requests)
	})

	t.Run("KeyReapedMidPassIsNotRecreated", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
		requests := b.Stripe.ChargeRequests()
		// The reaper deletes the key between the completer listing it and running it.
		b.Exec(t, `DELETE FROM idempotency_keys WHERE id = $1`, key.ID)

		done, err := b.completer.complete(context.Background(), key)
		if done || !errors.Is(err, phases.ErrKeyNotFound) {
			t.Fatalf("want ErrKeyNotFound, got done=%t %v", done, err)
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("want no key recreated, got %d", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides`); n != 1 {
			t.Fatalf("want only the first request's ride, got %d", n)
		}
		if b.Stripe.ChargeRequests() != requests {
			t.Fatal("want no charge sent for a reaped key")
		}
	})

	t.Run("FinishesKeyWhoseChargeWasMadeButNotRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The API died between Stripe charging and the charge being recorded.
		api := phases.New(b.Pool, b.FreshConnStripeClient(), slog.New(slog.DiscardHandler), phases.Config{})
		b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
		req := newRequest(b.Rider)
		if _, err := api.CreateRide(context.Background(), req); err == nil {
			t.Fatal("want the request to fail when the connection drops")
		}
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want Stripe to hold the unrecorded charge, got %d", n)
		}
		b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '10 minutes', last_run_at = now() - interval '2 minutes'`)

		b.runOnce(t, b.completer, Result{Succeeded: 1})
		if n := len(b.SucceededCharges()); n != 1 {
			t.Fatalf("want still exactly 1 charge, got %d", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE stripe_charge_id = $1`, b.SucceededCharges()[0].ID); n != 1 {
			t.Fatal("want the ride to record the charge Stripe replayed")
		}
	})

	// The completer finishes requests of every type: here a cancel whose refund Stripe made,
	// but whose answer was lost on the way.
	t.Run("FinishesCancelWhoseRefundWasMadeButNotRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		booked, err := b.executor.CreateRide(context.Background(), newRequest(b.Rider))
		if err != nil || booked.StatusCode != 201 {
			t.Fatalf("want the ride booked, got %v %v", booked, err)
		}
		var rideID int64
		if err := b.Pool.QueryRow(context.Background(), `SELECT id FROM rides WHERE user_id = $1`, b.Rider.ID).Scan(&rideID); err != nil {
			t.Fatal(err)
		}
		lost := phases.New(b.Pool, b.FreshConnStripeClient(), slog.New(slog.DiscardHandler), phases.Config{})
		b.Stripe.InjectRefundFaults(fakestripe.FaultChargeThenDrop, 1)
		cancel := &phases.CancelRideRequest{
			KeyedRequest: phases.KeyedRequest{
				User:           b.Rider.User,
				IdempotencyKey: "completer-test-cancel-0001",
				OriginIP:       netip.MustParseAddr("203.0.113.7"),
			},
			RideID: rideID,
		}
		if _, err := lost.CancelRide(context.Background(), cancel); err == nil {
			t.Fatal("want the cancel to fail when the refund's answer is lost")
		}
		if n := len(b.Stripe.Refunds()); n != 1 {
			t.Fatalf("want Stripe to hold the unrecorded refund, got %d", n)
		}
		b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '10 minutes', last_run_at = now() - interval '2 minutes'`)

		b.runOnce(t, b.completer, Result{Succeeded: 1})
		if n := len(b.Stripe.Refunds()); n != 1 {
			t.Fatalf("want still exactly 1 refund, got %d", n)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND status = 'cancelled' AND stripe_refund_id = $2`,
			rideID, b.Stripe.Refunds()[0].ID); n != 1 {
			t.Fatal("want the ride cancelled with the refund Stripe replayed")
		}
	})

	t.Run("TwoCompletersFinishEachKeyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var keys []*models.IdempotencyKey
		for range 6 {
			keys = append(keys, b.abandon(t, b.NewRider(t, "tok_visa"), models.RecoveryPointRideCreated))
		}
		other := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{})

		var wg sync.WaitGroup
		results := make([]*Result, 2)
		for i, c := range []*Completer{b.completer, other} {
			wg.Go(func() {
				res, err := c.RunOnce(context.Background())
				if err != nil {
					t.Errorf("RunOnce: %s", err)
					return
				}
				results[i] = res
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		if sum := results[0].Succeeded + results[1].Succeeded; sum != len(keys) || results[0].Failed+results[1].Failed != 0 {
			t.Fatalf("want each of %d keys finished by exactly one completer, got %+v and %+v", len(keys), *results[0], *results[1])
		}
		for _, key := range keys {
			b.requireFinishedCharged(t, key)
		}
		if n := len(b.SucceededCharges()); n != len(keys) {
			t.Fatalf("want %d charges, got %d", len(keys), n)
		}
	})
}

func TestCompleterStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
	c := New(b.Pool, b.executor, slog.New(slog.DiscardHandler), Config{Interval: 10 * time.Millisecond})

	c.Start(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for b.reload(t, key).RecoveryPoint != models.RecoveryPointFinished {
		if time.Now().After(deadline) {
			t.Fatal("want the running completer to finish the key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Stop()
	b.requireFinishedCharged(t, key)
}

// bookRide books a ride for the bundle's rider through the phases, and returns its id and charge.
func (b *testBundle) bookRide(t *testing.T) (rideID int64, chargeID string) {
	t.Helper()
	outcome, err := b.executor.CreateRide(t.Context(), newRequest(b.Rider))
	if err != nil || outcome.StatusCode != 201 {
		t.Fatalf("want a ride booked, got %+v, %v", outcome, err)
	}
	if err := b.Pool.QueryRow(t.Context(), `SELECT id, stripe_charge_id FROM rides`).Scan(&rideID, &chargeID); err != nil {
		t.Fatal(err)
	}
	return rideID, chargeID
}
