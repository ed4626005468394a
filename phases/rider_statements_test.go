package phases

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases/resource"
)

// riderTables hold rows of one rider each: on Citus they are distributed by user_id, and a
// statement that does not name the rider runs on every shard.
var riderTables = []string{"idempotency_keys", "rides", "audit_records", "abandoned_requests", "staged_jobs"}

// sqlRecorder records every statement a pool sends.
type sqlRecorder struct {
	mu  sync.Mutex
	sql []string
}

func (s *sqlRecorder) record(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, sql)
}

func (s *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.record(data.SQL)
	return ctx
}
func (s *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *sqlRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (s *sqlRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	s.record(data.SQL)
}
func (s *sqlRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

var (
	tableRef   = regexp.MustCompile(`\b(?:from|join|update|into)\s+([a-z_]+)`)
	insertCols = regexp.MustCompile(`^insert into [a-z_]+ \(([^)]*)\)`)
)

// ridersUnnamed returns the rider tables sql touches without naming the rider: an INSERT that
// sets no user_id, or a statement on one whose WHERE does not filter by it.
func ridersUnnamed(sql string) []string {
	sql = strings.Join(strings.Fields(strings.ToLower(sql)), " ")
	var unnamed []string
	for _, m := range tableRef.FindAllStringSubmatch(sql, -1) {
		table := m[1]
		if !slices.Contains(riderTables, table) || slices.Contains(unnamed, table) {
			continue
		}
		if cols := insertCols.FindStringSubmatch(sql); cols != nil && strings.HasPrefix(sql, "insert into "+table+" ") {
			if !slices.Contains(strings.Split(strings.ReplaceAll(cols[1], " ", ""), ","), "user_id") {
				unnamed = append(unnamed, table)
			}
			continue
		}
		_, where, ok := strings.Cut(sql, " where ")
		for _, end := range []string{" returning ", " order by ", " group by ", " limit ", " for update"} {
			where, _, _ = strings.Cut(where, end)
		}
		if !ok || !strings.Contains(where, "user_id") {
			unnamed = append(unnamed, table)
		}
	}
	return unnamed
}

func TestRidersUnnamed(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string][]string{
		`SELECT id FROM rides WHERE id = $1`:                                   {"rides"},
		`SELECT id FROM rides WHERE id = $1 AND user_id = $2`:                  nil,
		`UPDATE idempotency_keys SET x = 1 WHERE id = $1`:                      {"idempotency_keys"},
		`INSERT INTO audit_records (id, action) VALUES ($1, $2)`:               {"audit_records"},
		"INSERT INTO audit_records (id, action,\n user_id) VALUES ($1, $2, 3)": nil,
		`SELECT secret FROM stripe_key_secret`:                                 nil,
		`UPDATE rides SET x = 1 WHERE id = $1 RETURNING id, user_id`:           {"rides"},
	} {
		if got := ridersUnnamed(sql); !slices.Equal(got, want) {
			t.Errorf("%s: want %v, got %v", sql, want, got)
		}
	}
}

// TestEveryStatementNamesTheRider runs every kind of request through the phases (a ride, its
// replay, a declined card, a failure and its resumption, a lease renewed during a slow charge, a
// cancel, its refusal and the completer's way in) and requires each statement on a rider table
// to name the rider, so that on Citus each runs on the rider's shard alone.
func TestEveryStatementNamesTheRider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	recorder := &sqlRecorder{}
	pool := b.tracedPool(t, recorder, 0)
	e := New(pool, b.StripeClient, b.executor.logger, Config{SimulateErrors: true, LockLease: time.Second})

	created := b.requireCreateWith(t, e, newRequest(b.Rider))
	b.requireCreateWith(t, e, newRequest(b.Rider)) // replayed
	if _, err := e.CreateRide(ctx, newRequest(b.DecliningRider)); err != nil {
		t.Fatal(err)
	}
	failing := newRequest(b.Rider)
	failing.IdempotencyKey, failing.RaiseError = "statements-resumed-000000001", true
	if _, err := e.CreateRide(ctx, failing); !errors.Is(err, ErrSimulated) {
		t.Fatalf("want ErrSimulated, got %v", err)
	}
	failing.RaiseError = false
	b.Stripe.SetLatency(900 * time.Millisecond) // past a renewal of the 1 s lease
	b.requireCreateWith(t, e, failing)
	b.Stripe.SetLatency(0)

	outcome, err := e.CancelRide(ctx, newCancel(b.Rider, created.Ride.ID, cancelKey))
	requireCancelled(t, outcome, err)
	if _, err := e.CancelRide(ctx, newCancel(b.Rider, created.Ride.ID, cancelKey+"-2")); err != nil {
		t.Fatal(err)
	}
	unfinished := newRequest(b.Rider)
	unfinished.IdempotencyKey, unfinished.RaiseError = "statements-completer-0000001", true
	if _, err := e.CreateRide(ctx, unfinished); !errors.Is(err, ErrSimulated) {
		t.Fatalf("want ErrSimulated, got %v", err)
	}
	key, err := models.IdempotencyKeyGetForUpdate(ctx, b.Pool, b.Rider.ID, unfinished.IdempotencyKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(ctx, b.Rider.User, key); err != nil {
		t.Fatal(err)
	}

	recorder.mu.Lock()
	defer recorder.mu.Unlock()
	seen := map[string]bool{}
	for _, sql := range recorder.sql {
		if seen[sql] {
			continue
		}
		seen[sql] = true
		if unnamed := ridersUnnamed(sql); unnamed != nil {
			t.Errorf("a statement on %v names no rider:\n%s", unnamed, strings.TrimSpace(sql))
		}
	}
}

// requireCreateWith runs req on e and requires a 201.
func (b *testBundle) requireCreateWith(t *testing.T, e *Executor, req *CreateRideRequest) resource.RideCreated {
	t.Helper()
	outcome, err := e.CreateRide(context.Background(), req)
	return requireCreated(t, outcome, err)
}
