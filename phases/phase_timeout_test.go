package phases

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/models"
)

// TestPhaseTimeout plays a database that has stopped answering: every connection of the pool is
// taken, so the request's first atomic phase can get none. It gives up after PhaseTimeout with an
// error that callers answer "try again later", not after the whole request timeout, and nothing
// is stored.
func TestPhaseTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool := onePool(t, b)
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	const phaseTimeout = 300 * time.Millisecond
	executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
		PhaseTimeout:        phaseTimeout,
		ConflictRetryBudget: 100 * time.Millisecond,
	})
	start := time.Now()
	_, err = executor.CreateRide(ctx, newRequest(b.Rider))
	elapsed := time.Since(start)
	if err == nil || !models.IsUnavailable(err) {
		t.Fatalf("want an error meaning the database is unavailable, got %v", err)
	}
	// The upper bound stays under PhaseTimeoutDefault, so that it is the configured timeout
	// that acted, and leaves seconds for a loaded machine to notice it.
	if elapsed < phaseTimeout || elapsed > PhaseTimeoutDefault-2*time.Second {
		t.Fatalf("want the request to give up after the phase timeout (%s), it took %s", phaseTimeout, elapsed)
	}
	if n := b.Count(t, "SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Fatalf("want nothing stored, got %d keys", n)
	}
}

// TestPhaseTimeoutAfterTheCharge plays a database that stops answering between the charge and
// the phase that records it: that phase gives up after PhaseTimeout, and the unlock that follows
// tries for UnlockAfterOutageTimeout only, so that the rider's 503 comes within the two, not
// after the unlock's full wait on a database that does not answer.
func TestPhaseTimeoutAfterTheCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool := onePool(t, b)

	const phaseTimeout = 300 * time.Millisecond
	executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
		PhaseTimeout:        phaseTimeout,
		ConflictRetryBudget: 100 * time.Millisecond,
		LockLease:           time.Hour, // no renewal wants the connection meanwhile
	})
	var held *pgxpool.Conn
	executor.hooks.afterCharge = func(ctx context.Context) {
		var err error
		if held, err = pool.Acquire(ctx); err != nil {
			t.Error(err)
		}
	}
	start := time.Now()
	_, err := executor.CreateRide(ctx, newRequest(b.Rider))
	elapsed := time.Since(start)
	if held != nil {
		held.Release()
	}
	if err == nil || !models.IsUnavailable(err) {
		t.Fatalf("want an error meaning the database is unavailable, got %v", err)
	}
	// Well under unlockTimeout, so that it is the short unlock that acted.
	if limit := phaseTimeout + UnlockAfterOutageTimeout + 2*time.Second; elapsed > limit {
		t.Fatalf("want the answer within the phase timeout and the short unlock (%s), it took %s", limit, elapsed)
	}
	if key := b.key(t, b.Rider); key.RecoveryPoint != models.RecoveryPointRideCreated {
		t.Fatalf("want the key left at ride_created, got %s", key.RecoveryPoint)
	}
}

// onePool opens a pool of one connection on b's database, closed when the test ends: a test
// that takes the connection plays a database that stopped answering.
func onePool(t *testing.T, b *testBundle) *pgxpool.Pool {
	t.Helper()
	config, err := pgxpool.ParseConfig(b.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	config.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
