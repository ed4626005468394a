package phases

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementTracer counts what a connection sends Postgres: round trips (a query, or a batch of
// them), statements other than BEGIN and COMMIT, and commits.
type statementTracer struct {
	roundTrips, statements, commits int
}

func (s *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.roundTrips++
	s.count(data.SQL)
	return ctx
}

func (s *statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statementTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.roundTrips++
	return ctx
}

func (s *statementTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	s.count(data.SQL)
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
// batch of inserts, COMMIT) and the second in two (BEGIN with the batch of writes, COMMIT).
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	tracer := &statementTracer{}
	config, err := pgxpool.ParseConfig(b.Pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	config.ConnConfig.Tracer = tracer
	config.MaxConns = 1 // one connection, whose statement cache the first ride fills
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	executor := New(pool, b.StripeClient, slog.New(slog.DiscardHandler), Config{})

	first := newRequest(b.Rider)
	first.IdempotencyKey = "round-trips-warm-up-0000000001"
	outcome, err := executor.CreateRide(ctx, first)
	requireCreated(t, outcome, err)

	*tracer = statementTracer{}
	outcome, err = executor.CreateRide(ctx, newRequest(b.Rider))
	requireCreated(t, outcome, err)
	if want := (statementTracer{roundTrips: 5, statements: 7, commits: 2}); *tracer != want {
		t.Fatalf("want a new ride to cost %+v, got %+v", want, *tracer)
	}

	*tracer = statementTracer{}
	outcome, err = executor.CreateRide(ctx, newRequest(b.Rider))
	requireCreated(t, outcome, err)
	if want := (statementTracer{roundTrips: 2, statements: 1, commits: 1}); !outcome.Replayed || *tracer != want {
		t.Fatalf("want a replay to cost %+v, got %+v (replayed %t)", want, *tracer, outcome.Replayed)
	}
}
