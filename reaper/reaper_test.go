package reaper

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
)

// refundsDropped is a Stripe transport on which every refund is lost on the way.
type refundsDropped struct{}

func (refundsDropped) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/v1/refunds" {
		return nil, errors.New("connection reset by peer (test)")
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestReaperRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeletesOldKeyKeepsYoungAndTheRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := b.request(t, b.Rider, false, "72 hours 1 minute")
		young := b.request(t, b.Rider, false, "71 hours 59 minutes")
		ride, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, old.UserID, old.ID)
		if err != nil {
			t.Fatal(err)
		}

		b.runOnce(t, b.reaper, Result{Reaped: 1})
		if b.keyExists(t, old) || !b.keyExists(t, young) {
			t.Fatalf("want the old key deleted and the young one kept")
		}
		after, err := models.RideGetByIDForUser(ctx, b.Pool, ride.ID, b.Rider.ID)
		if err != nil {
			t.Fatalf("want the ride kept: %s", err)
		}
		if after.IdempotencyKeyID != nil || after.StripeChargeID == nil || *after.StripeChargeID != *ride.StripeChargeID {
			t.Fatalf("want the ride charged as before with no key, got key %v charge %v", after.IdempotencyKeyID, after.StripeChargeID)
		}
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests`); n != 0 {
			t.Fatalf("want a finished key reaped without a record, got %d", n)
		}

		b.runOnce(t, b.reaper, Result{})
	})

	t.Run("EmptyDatabase", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.runOnce(t, b.reaper, Result{})
	})

	t.Run("RecordsUnfinishedKeyBeforeDeletingIt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.request(t, b.Rider, true, "73 hours")
		ride, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, key.UserID, key.ID)
		if err != nil {
			t.Fatal(err)
		}

		b.runOnce(t, b.reaper, Result{Reaped: 1, Abandoned: 1})
		if b.keyExists(t, key) {
			t.Fatal("want the key deleted")
		}
		requests, err := models.AbandonedRequestList(ctx, b.Pool, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(requests) != 1 {
			t.Fatalf("want 1 abandoned request, got %d", len(requests))
		}
		r := requests[0]
		var params, keyParams map[string]float64
		_ = json.Unmarshal(r.RequestParams, &params)
		_ = json.Unmarshal(key.RequestParams, &keyParams)
		switch {
		case r.Reason != models.AbandonedReasonReapedUnfinished:
			t.Fatalf("want reason %s, got %s", models.AbandonedReasonReapedUnfinished, r.Reason)
		case r.IdempotencyKey != key.IdempotencyKey || r.UserID != b.Rider.ID || r.RecoveryPoint != models.RecoveryPointRideCreated:
			t.Fatalf("want key %s of user %d at ride_created, got %s of %d at %s", key.IdempotencyKey, b.Rider.ID, r.IdempotencyKey, r.UserID, r.RecoveryPoint)
		case len(params) != 4 || params["origin_lat"] != keyParams["origin_lat"] || params["target_lon"] != keyParams["target_lon"]:
			t.Fatalf("want the key's params %s, got %s", key.RequestParams, r.RequestParams)
		case r.LastError == nil || key.LastError == nil || *r.LastError != *key.LastError:
			t.Fatalf("want the key's last error %v, got %v", key.LastError, r.LastError)
		case !r.KeyCreatedAt.Equal(key.CreatedAt) || !r.KeyLastRunAt.Equal(key.LastRunAt):
			t.Fatalf("want the key's times %s %s, got %s %s", key.CreatedAt, key.LastRunAt, r.KeyCreatedAt, r.KeyLastRunAt)
		case r.RideID == nil || *r.RideID != ride.ID:
			t.Fatalf("want ride %d, got %v", ride.ID, r.RideID)
		case r.IdempotencyKeyID != nil:
			t.Fatalf("want the record's key id cleared with the key, got %d", *r.IdempotencyKeyID)
		}
		if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND idempotency_key_id IS NULL`, ride.ID); n != 1 {
			t.Fatal("want the ride kept, with no key")
		}
	})

	t.Run("UnfinishedKeyWithoutRideIsRecordedWithoutRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insertKeys(t, b.Rider, 1, "73 hours")

		b.runOnce(t, b.reaper, Result{Reaped: 1, Abandoned: 1})
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE recovery_point = 'started' AND ride_id IS NULL`); n != 1 {
			t.Fatalf("want 1 record at started without a ride, got %d", n)
		}
	})

	// A cancel that stopped after claiming its ride, the refund not known: a person must see
	// which ride it was about.
	t.Run("UnfinishedCancelIsRecordedWithItsRide", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		booking := b.request(t, b.Rider, false, "1 minute")
		ride, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, booking.UserID, booking.ID)
		if err != nil {
			t.Fatal(err)
		}
		noRefunds := stripeclient.New(stripeclient.Config{APIKey: ridetest.StripeAPIKey, URL: b.Stripe.URL,
			Timeout: ridetest.StripeTimeout, Transport: refundsDropped{}})
		cancel := &phases.CancelRideRequest{
			KeyedRequest: phases.KeyedRequest{
				User:           b.Rider.User,
				IdempotencyKey: "reaper-test-cancel-000001",
				OriginIP:       netip.MustParseAddr("203.0.113.7"),
			},
			RideID: ride.ID,
		}
		if _, err := phases.New(b.Pool, noRefunds, slog.New(slog.DiscardHandler), phases.Config{}).CancelRide(ctx, cancel); err == nil {
			t.Fatal("want the cancel to fail with its refund dropped")
		}
		b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '73 hours' WHERE idempotency_key = $1`, cancel.IdempotencyKey)

		b.runOnce(t, b.reaper, Result{Reaped: 1, Abandoned: 1})
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE recovery_point = 'started' AND ride_id = $1`, ride.ID); n != 1 {
			t.Fatalf("want the cancel recorded with its ride, got %d", n)
		}
	})

	t.Run("KeyThatCannotBeRecordedIsNotDeleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.request(t, b.Rider, true, "73 hours")
		b.Exec(t, `CREATE FUNCTION test_fail_insert() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'test: abandoned_requests is broken'; END $$`)
		b.Exec(t, `CREATE TRIGGER test_fail_insert BEFORE INSERT ON abandoned_requests
			FOR EACH ROW EXECUTE FUNCTION test_fail_insert()`)

		if _, err := b.reaper.RunOnce(ctx); err == nil {
			t.Fatal("want an error")
		}
		if !b.keyExists(t, key) {
			t.Fatal("want the key kept while it cannot be recorded")
		}

		b.Exec(t, `DROP TRIGGER test_fail_insert ON abandoned_requests`)
		b.runOnce(t, b.reaper, Result{Reaped: 1, Abandoned: 1})
	})

	t.Run("KeyLockedByLiveRequestIsLeftForLater", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		key := b.request(t, b.Rider, true, "73 hours")
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '30 seconds', locked_until = now() + interval '1 minute', lock_generation = lock_generation + 1 WHERE id = $1`, key.ID)

		b.runOnce(t, b.reaper, Result{})

		// Its request died: the lease ran out.
		b.Exec(t, `UPDATE idempotency_keys SET locked_at = now() - interval '10 seconds', locked_until = now() - interval '1 second', lock_generation = lock_generation + 1 WHERE id = $1`, key.ID)
		b.runOnce(t, b.reaper, Result{Reaped: 1, Abandoned: 1})
	})

	t.Run("BatchIsBoundedOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.insertKeys(t, b.Rider, 5, "73 hours")
		r := New(b.Pool, slog.New(slog.DiscardHandler), Config{BatchSize: 2})

		b.runOnce(t, r, Result{Reaped: 2, Abandoned: 2})
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key IN ('bulk-test-key-00000001', 'bulk-test-key-00000002')`); n != 0 {
			t.Fatalf("want the two oldest keys reaped first, %d left", n)
		}
		b.runOnce(t, r, Result{Reaped: 2, Abandoned: 2})
		b.runOnce(t, r, Result{Reaped: 1, Abandoned: 1})
		b.runOnce(t, r, Result{})
	})

	t.Run("TwoReapersRecordAndDeleteEachKeyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const numKeys = 500
		b.insertKeys(t, b.Rider, numKeys, "73 hours")

		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total Result
		)
		for range 2 {
			r := New(b.Pool, slog.New(slog.DiscardHandler), Config{BatchSize: 20})
			wg.Go(func() {
				for {
					res, err := r.RunOnce(ctx)
					if err != nil {
						t.Errorf("RunOnce: %s", err)
						return
					}
					if res.Reaped == 0 {
						return // the rest, if any, is locked by the other reaper, which goes on
					}
					mu.Lock()
					total.Reaped += res.Reaped
					total.Abandoned += res.Abandoned
					mu.Unlock()
				}
			})
		}
		wg.Wait()

		if total != (Result{Reaped: numKeys, Abandoned: numKeys}) {
			t.Fatalf("want %d keys reaped and recorded in all, got %+v", numKeys, total)
		}
		if n := b.Count(t, `SELECT count(DISTINCT idempotency_key) FROM abandoned_requests`); n != numKeys {
			t.Fatalf("want %d distinct records, got %d", numKeys, n)
		}
		if n := b.Count(t, `SELECT count(*) FROM abandoned_requests`); n != numKeys {
			t.Fatalf("want %d records, no doubles, got %d", numKeys, n)
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("want every key reaped, %d left", n)
		}
	})
}

func TestReaperStartStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insertKeys(t, b.Rider, 3, "73 hours")
	r := New(b.Pool, slog.New(slog.DiscardHandler), Config{BatchSize: 2, Interval: 10 * time.Millisecond})

	r.Start(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for b.Count(t, `SELECT count(*) FROM idempotency_keys`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("want the running reaper to reap every key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Stop()
	if n := b.Count(t, `SELECT count(*) FROM abandoned_requests`); n != 3 {
		t.Fatalf("want 3 records, got %d", n)
	}
}
