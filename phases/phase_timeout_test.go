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
// error that callers answer "try again later", and nothing is stored. Which bound the phase
// took is read from the executor; the request's own timeout is an hour, so that a request that
// ends at all ended on the phase's, however loaded the machine.
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
		RequestTimeout:      time.Hour,
		ConflictRetryBudget: 100 * time.Millisecond,
	})
	var phaseWait time.Duration
	executor.hooks.phaseTimeout = func(d time.Duration) { phaseWait = d }
	start := time.Now()
	_, err = executor.CreateRide(ctx, newRequest(b.Rider))
	elapsed := time.Since(start)
	if err == nil || !models.IsUnavailable(err) {
		t.Fatalf("want an error meaning the database is unavailable, got %v", err)
	}
	if phaseWait != phaseTimeout || elapsed < phaseTimeout || elapsed > time.Minute {
		t.Fatalf("want the request to give up after the phase timeout (%s), its phase was given %s and it took %s", phaseTimeout, phaseWait, elapsed)
	}
	if n := b.Count(t, "SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Fatalf("want nothing stored, got %d keys", n)
	}
}

// TestPhaseTimeoutAfterTheCharge plays a database that stops answering between the charge and
// the phase that records it: that phase gives up after PhaseTimeout, and the unlock that follows
// tries for UnlockAfterOutageTimeout only, so that the rider's 503 comes within the two, not
// after the unlock's full wait on a database that does not answer. Which wait the unlock took is
// read from the executor, not from a clock that load can stretch.
func TestPhaseTimeoutAfterTheCharge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool := onePool(t, b)

	// The phase before the charge must commit within the timeout on a loaded machine, where
	// 300 ms once fell short; the phase after it waits the whole timeout for the held
	// connection, so the bound is short enough to keep the test quick.
	const phaseTimeout = 3 * time.Second
	executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{
		PhaseTimeout: phaseTimeout,
		LockLease:    time.Hour, // no renewal wants the connection meanwhile
	})
	var held *pgxpool.Conn
	executor.hooks.afterStripeCall = func(ctx context.Context) {
		var err error
		if held, err = pool.Acquire(ctx); err != nil {
			t.Error(err)
		}
	}
	var unlockWait time.Duration
	executor.hooks.unlockTimeout = func(d time.Duration) { unlockWait = d }
	_, err := executor.CreateRide(ctx, newRequest(b.Rider))
	if held != nil {
		held.Release()
	}
	if err == nil || !models.IsUnavailable(err) {
		t.Fatalf("want an error meaning the database is unavailable, got %v", err)
	}
	if unlockWait != UnlockAfterOutageTimeout {
		t.Fatalf("want the unlock to wait UnlockAfterOutageTimeout (%s) on a database that does not answer, it waited up to %s", UnlockAfterOutageTimeout, unlockWait)
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
