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

	config, err := pgxpool.ParseConfig(b.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	config.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
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
