package phases

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/models"
)

func TestStripeIdempotencyKey(t *testing.T) {
	t.Parallel()

	secret := []byte("0123456789abcdef0123456789abcdef")
	key := StripeIdempotencyKey(secret, 12, "client-key-0123456789")
	if key != StripeIdempotencyKey(secret, 12, "client-key-0123456789") {
		t.Fatal("the same rider and client key derived two Stripe keys")
	}
	if !strings.HasPrefix(key, "rocket-rides-") || len(key) < 20 || len(key) > 255 {
		t.Fatalf("want a key that idempotency_keys' CHECK accepts, got %q", key)
	}
	for name, other := range map[string]string{
		"OtherSecret": StripeIdempotencyKey([]byte("another secret, another database"), 12, "client-key-0123456789"),
		"OtherRider":  StripeIdempotencyKey(secret, 13, "client-key-0123456789"),
		"OtherKey":    StripeIdempotencyKey(secret, 12, "client-key-0123456780"),
		// Rider 1 with key "2client-…" must not be rider 12 with key "client-…".
		"DigitsMovedIntoTheKey": StripeIdempotencyKey(secret, 1, "2client-key-0123456789"),
	} {
		if other == key {
			t.Errorf("%s: derived the same Stripe key", name)
		}
	}
}

// TestLostCommit restores the database from a backup taken before a ride was booked, as an
// operator would after losing the primary, or as an asynchronous standby promoted without the
// ride's commits would leave it: the database has forgotten the request. The rider's retry of
// the same key must get the charge Stripe already made back, not a second one.
func TestLostCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// The backup. Its database must have no connections while it is copied.
	b.Pool.Reset()
	backupURL := dbtest.CopyDB(t, b.Pool.Config().ConnString())

	first := b.requireCreate(t, newRequest(b.Rider))
	stripeKey := b.key(t, b.Rider).StripeIdempotencyKey

	restored, err := pgxpool.New(ctx, backupURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restored.Close)
	if _, err := models.IdempotencyKeyGetForUpdate(ctx, restored, b.Rider.ID, testKey); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("want the restored database to have no key for the ride, got %v", err)
	}
	executor := New(restored, b.StripeClient, slog.New(slog.DiscardHandler), Config{LockLease: time.Hour})
	outcome, err := executor.CreateRide(ctx, newRequest(b.Rider))
	retried := requireCreated(t, outcome, err)

	if got, want := deref(retried.Ride.StripeChargeID), deref(first.Ride.StripeChargeID); want == "" || got != want {
		t.Errorf("want the retry to record the first charge %q, got %q", want, got)
	}
	if n := len(b.SucceededCharges()); n != 1 {
		t.Errorf("want Stripe to hold 1 charge, got %d: the rider was charged twice", n)
	}
	key, err := models.IdempotencyKeyGetForUpdate(ctx, restored, b.Rider.ID, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if key.StripeIdempotencyKey != stripeKey {
		t.Errorf("want the retry's Stripe key %q to be the first's, %q", key.StripeIdempotencyKey, stripeKey)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestRacingFirstRequests sends one key's first request twice at once, as a double tap does,
// both transactions inserting the key and deriving the same Stripe key. The loser must find out
// through the serialization failure of the (user_id, idempotency_key) index, which a retry turns
// into ErrKeyInUse or a replay, never through a unique violation on the Stripe key, which would
// answer 500.
func TestRacingFirstRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Both first transactions get past the key's lookup, finding nothing, before either commits.
	var arrived sync.WaitGroup
	arrived.Add(2)
	var first atomic.Int32
	b.executor.hooks.inPhase = func(_ context.Context, _ models.DBTX, point models.RecoveryPoint) error {
		if point == models.RecoveryPointStarted && first.Add(1) <= 2 {
			arrived.Done()
			arrived.Wait()
		}
		return nil
	}

	errs := make(chan error, 2)
	created := make(chan *Outcome, 2)
	for range 2 {
		go func() {
			outcome, err := b.executor.CreateRide(context.Background(), newRequest(b.Rider))
			created <- outcome
			errs <- err
		}()
	}
	for range 2 {
		outcome, err := <-created, <-errs
		switch {
		case errors.Is(err, ErrKeyInUse):
		case err != nil:
			t.Errorf("want a 201 or ErrKeyInUse, got %v", err)
		case outcome.StatusCode != 201:
			t.Errorf("want a 201, got %d: %s", outcome.StatusCode, outcome.Body)
		}
	}
	if n := len(b.SucceededCharges()); n != 1 {
		t.Errorf("want one charge, got %d", n)
	}
}
