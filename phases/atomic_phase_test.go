package phases

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/models"
)

func TestAtomicPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// conflictAt makes the phase at point fail with a real serialization failure the first
	// `times` tries: a concurrent transaction updates a row and commits, then the phase updates
	// the same row, which SERIALIZABLE refuses since the phase's snapshot predates that commit.
	conflictAt := func(b *testBundle, point models.RecoveryPoint, times int) *int {
		b.Exec(t, `CREATE TABLE conflict_probe (n int NOT NULL); INSERT INTO conflict_probe VALUES (0)`)
		tries := 0
		b.executor.hooks.inPhase = func(ctx context.Context, tx models.DBTX, p models.RecoveryPoint) error {
			if p != point {
				return nil
			}
			tries++
			if tries > times {
				return nil
			}
			if _, err := b.Pool.Exec(ctx, `UPDATE conflict_probe SET n = n + 1`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE conflict_probe SET n = n + 1`)
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

	// A real deadlock: the phase holds one row, a concurrent transaction holds another and waits
	// for the phase's, and the phase then waits for the other's. The phase's session looks for
	// deadlocks first (its deadlock_timeout is the shorter), so Postgres aborts the phase with
	// 40P01 and lets the other through; the phase's retry books the ride.
	t.Run("DeadlockIsRetriedByItself", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.Exec(t, `CREATE TABLE deadlock_probe (id int PRIMARY KEY, n int NOT NULL); INSERT INTO deadlock_probe VALUES (1, 0), (2, 0)`)
		tries := 0
		other := make(chan error, 1)
		b.executor.hooks.inPhase = func(ctx context.Context, tx models.DBTX, p models.RecoveryPoint) error {
			if p != models.RecoveryPointRideCreated {
				return nil
			}
			tries++
			if tries > 1 {
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE deadlock_probe SET n = n + 1 WHERE id = 1`); err != nil {
				return err
			}
			otherTx, err := b.Pool.Begin(ctx)
			if err != nil {
				return err
			}
			var otherPID int
			err = otherTx.QueryRow(ctx, `SELECT pg_backend_pid() FROM
				(SELECT set_config('deadlock_timeout', '1min', true)) AS s`).Scan(&otherPID)
			if err == nil {
				_, err = otherTx.Exec(ctx, `UPDATE deadlock_probe SET n = n + 1 WHERE id = 2`)
			}
			if err != nil {
				_ = otherTx.Rollback(ctx)
				return err
			}
			// The other transaction outlives the phase's try, whose context ends with its atomic
			// phase: on a loaded machine the retry can commit before the other gets to.
			otherCtx := context.WithoutCancel(ctx)
			go func() {
				_, err := otherTx.Exec(otherCtx, `UPDATE deadlock_probe SET n = n + 1 WHERE id = 1`)
				if err == nil {
					err = otherTx.Commit(otherCtx)
				} else {
					_ = otherTx.Rollback(otherCtx)
				}
				other <- err
			}()
			for waiting := false; !waiting; {
				err := b.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
					WHERE pid = $1 AND wait_event_type = 'Lock')`, otherPID).Scan(&waiting)
				if err != nil {
					return err
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := tx.Exec(ctx, `SELECT set_config('deadlock_timeout', '10ms', true)`); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE deadlock_probe SET n = n + 1 WHERE id = 2`)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
				t.Errorf("want the phase's update to end in a deadlock (40P01), got %v", err)
			}
			return err
		}

		b.requireCreate(t, newRequest(b.Rider))
		if err := <-other; err != nil {
			t.Fatalf("want the other transaction through once the phase gave way, got %v", err)
		}
		// The deadlocked try, its retry, then the phase after the charge.
		if tries != 3 {
			t.Fatalf("want the hook run 3 times, got %d", tries)
		}
		b.requireOneChargedRide(t, b.Rider)
	})

	t.Run("SerializationFailuresGiveUpAfterTheBudgetAndStoreNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The budget's clock moves a tenth of the budget each time the executor reads it, that
		// is once before the first try and once after each failed one: the budget runs out
		// after the tenth try, however long the tries take on a loaded machine.
		const budget = time.Second
		b.executor = New(b.Pool, b.StripeClient, b.executor.logger, Config{ConflictRetryBudget: budget, PhaseTimeout: time.Minute})
		var clock time.Time
		b.executor.hooks.now = func() time.Time {
			clock = clock.Add(budget / 10)
			return clock
		}
		tries := conflictAt(b, models.RecoveryPointRideCreated, 1_000_000)

		_, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		if !errors.Is(err, ErrConflict) || !isRetryable(err) {
			t.Fatalf("want ErrConflict wrapping a serialization failure, got %v", err)
		}
		if *tries != 10 {
			t.Fatalf("want the phase tried 10 times within the budget, got %d tries", *tries)
		}
		if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Fatalf("want nothing stored, got %d keys", n)
		}
		if b.Stripe.ChargeRequests() != 0 {
			t.Fatal("want no charge sent")
		}

		b.executor.hooks.inPhase = nil
		b.requireCreate(t, newRequest(b.Rider))
		b.requireOneChargedRide(t, b.Rider)
	})
}

func TestResponseStoresNoRequestID(t *testing.T) {
	t.Parallel()
	p := problem.New(statusPaymentRequired, problem.CodeCardDeclined, "Card declined", "Declined.")
	p.RequestID = "req_first_attempt"

	var progress models.IdempotencyKeyProgress
	if err := (Response{Status: statusPaymentRequired, Body: p}).apply(&progress); err != nil {
		t.Fatal(err)
	}
	var stored problem.Problem
	if err := json.Unmarshal(progress.ResponseBody, &stored); err != nil {
		t.Fatal(err)
	}
	if stored.RequestID != "" || stored.Code != problem.CodeCardDeclined || stored.Detail != "Declined." {
		t.Fatalf("want the problem stored without a request id, got %s", progress.ResponseBody)
	}
	if p.RequestID != "req_first_attempt" {
		t.Fatal("want the phase's own problem left as it was")
	}
}
