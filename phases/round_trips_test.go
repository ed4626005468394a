package phases

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// statementTracer counts what a connection sends Postgres: round trips (a query, or a batch of
// them), statements other than BEGIN and COMMIT, and commits; and apart, the notifications that
// wake the enqueuer, which are sent after the request answered (stagedJobsNotifier).
type statementTracer struct {
	mu sync.Mutex
	costs
}

// costs are what statementTracer counted.
type costs struct {
	roundTrips, statements, commits, notifies int
}

func (s *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(data.SQL, "pg_notify") {
		s.notifies++
		return ctx
	}
	s.roundTrips++
	s.count(data.SQL)
	return ctx
}

func (s *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roundTrips++
	return ctx
}

func (s *statementTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(data.SQL)
}

// take returns what was counted, once notifies notifications were sent (the notifier sends its
// own after the request answered), and starts counting again.
func (s *statementTracer) take(t *testing.T, notifies int) costs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		c := s.costs
		if c.notifies >= notifies || time.Now().After(deadline) {
			s.costs = costs{}
			s.mu.Unlock()
			return c
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func (s *statementTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *statementTracer) count(sql string) {
	switch sql := strings.ToLower(strings.TrimSpace(sql)); {
	case sql == "commit":
		s.commits++
	case strings.HasPrefix(sql, "begin"):
	default:
		s.statements++
	}
}

// TestRoundTrips pins what one new ride costs Postgres, as docs/performance.md says: two
// commits, the first atomic phase in three round trips (BEGIN with the key's lookup, the
// batch of inserts, COMMIT) and the second in two (BEGIN with the batch of writes and the read
// of the Stripe events kept for the charge, COMMIT).
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	tracer := &statementTracer{}
	pool := b.tracedPool(t, tracer, 1) // one connection, whose statement cache the first ride fills
	executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{})

	first := newRequest(b.Rider)
	first.IdempotencyKey = "round-trips-warm-up-0000000001"
	outcome, err := executor.CreateRide(ctx, first)
	requireCreated(t, outcome, err)
	tracer.take(t, 1)

	outcome, err = executor.CreateRide(ctx, newRequest(b.Rider))
	requireCreated(t, outcome, err)
	if got, want := tracer.take(t, 1), (costs{roundTrips: 5, statements: 8, commits: 2, notifies: 1}); got != want {
		t.Fatalf("want a new ride to cost %+v, got %+v", want, got)
	}

	outcome, err = executor.CreateRide(ctx, newRequest(b.Rider))
	requireCreated(t, outcome, err)
	if got, want := tracer.take(t, 0), (costs{roundTrips: 2, statements: 1, commits: 1}); !outcome.Replayed || got != want {
		t.Fatalf("want a replay to cost %+v, got %+v (replayed %t)", want, got, outcome.Replayed)
	}
}
