package phases

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/models"
)

func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A request waiting on Stripe for longer than its lease keeps its key: it renews the lease,
	// and a retry during the wait finds the key in use, long after the first lease would have
	// run out. The request then finishes as usual.
	t.Run("LiveRequestKeepsItsKeyPastTheLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const lease = time.Second
		executor := New(b.Pool, b.StripeClient, b.executor.logger, Config{LockLease: lease})
		retry := New(b.Pool, b.StripeClient, b.executor.logger, Config{LockLease: lease})

		var (
			once                sync.Once
			retryErr            error
			untilAtStart, until time.Time
		)
		executor.hooks.afterStripeCall = func(ctx context.Context) {
			once.Do(func() {
				untilAtStart = *b.key(t, b.Rider).LockedUntil
				time.Sleep(3 * lease) // Stripe is slow
				_, retryErr = retry.CreateRide(ctx, newRequest(b.Rider))
				if k := b.key(t, b.Rider); k.LockedUntil != nil { // nil if the retry took it over and finished
					until = *k.LockedUntil
				}
			})
		}
		outcome, err := executor.CreateRide(ctx, newRequest(b.Rider))
		requireCreated(t, outcome, err)
		if !errors.Is(retryErr, ErrKeyInUse) {
			t.Fatalf("want the retry, %s into a %s lease, to find the key in use, got %v", 3*lease, lease, retryErr)
		}
		if !until.After(untilAtStart.Add(lease)) {
			t.Fatalf("want the lease renewed during the wait, it ran until %s at the start and %s after", untilAtStart, until)
		}
		b.requireOneChargedRide(t, b.Rider)
	})

	// Renewals stop once the key is taken over; the request is fenced out at its next phase.
	t.Run("RenewalStopsWhenTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const lease = time.Second
		executor := New(b.Pool, b.StripeClient, b.executor.logger, Config{LockLease: lease})
		var successor int64
		executor.hooks.afterStripeCall = func(context.Context) {
			if err := b.Pool.QueryRow(ctx, `UPDATE idempotency_keys SET locked_at = now(),
				locked_until = now() + interval '1 hour', lock_generation = lock_generation + 1
				RETURNING lock_generation`).Scan(&successor); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * lease) // renewals tick meanwhile, and must not touch the successor's lease
		}
		if _, err := executor.CreateRide(ctx, newRequest(b.Rider)); !errors.Is(err, ErrLockLost) {
			t.Fatalf("want ErrLockLost, got %v", err)
		}
		key := b.key(t, b.Rider)
		if key.LockGeneration != successor || key.LockedUntil == nil || time.Until(*key.LockedUntil) < 50*time.Minute ||
			key.RecoveryPoint != models.RecoveryPointRideCreated {
			t.Fatalf("want the successor's hour-long lease untouched at ride_created, got generation %d (want %d) until %v at %s",
				key.LockGeneration, successor, key.LockedUntil, key.RecoveryPoint)
		}
	})
}
