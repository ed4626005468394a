package phases

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
)

func TestAtomicPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// conflictAt makes the phase at point fail with a real serialization failure the first
	// `times` tries: a concurrent transaction updates the ride and commits, then the phase
	// updates the same ride, which SERIALIZABLE refuses.
	conflictAt := func(b *testBundle, point models.RecoveryPoint, times int) *int {
		tries := 0
		b.executor.hooks.inPhase = func(ctx context.Context, tx pgx.Tx, p models.RecoveryPoint) error {
			if p != point {
				return nil
			}
			tries++
			if tries > times {
				return nil
			}
			if _, err := b.Pool.Exec(ctx, `UPDATE rides SET created_at = created_at`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE rides SET created_at = created_at`)
			return err
		}
		return &tries
	}

	t.Run("SerializationFailureIsRetriedByItself", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tries := conflictAt(b, models.RecoveryPointRideCreated, 2)

		b.requireCreate(t, newRequest(b.Rider))
		// Three tries of the phase before the charge, then one of the phase after it, which
		// starts from ride_created too.
		if *tries != 4 {
			t.Fatalf("want the hook run 4 times, got %d", *tries)
		}
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("SerializationFailureDuringChargeGivesUpAndUnlocks", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tries := conflictAt(b, models.RecoveryPointRideCreated, 100)

		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		if !errors.Is(err, ErrConflict) || !isRetryable(errors.Unwrap(err)) && !isRetryable(err) {
			t.Fatalf("want ErrConflict wrapping a serialization failure, got %v", err)
		}
		if *tries != b.executor.config.MaxPhaseAttempts {
			t.Fatalf("want %d tries, got %d", b.executor.config.MaxPhaseAttempts, *tries)
		}
		b.requireUnlockedAt(t, b.Rider, models.RecoveryPointRideCreated)
		if b.Stripe.ChargeRequests() != 0 {
			t.Fatal("want no charge sent")
		}
	})
}
