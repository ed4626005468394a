package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStuckDatabase holds a table lock, as an operator's LOCK TABLE or a migration would: a ride
// request that needs the table is answered 503 service_unavailable with Retry-After, not left
// waiting as long as the client does, and /readyz still answers 200. The lock is held until the
// answers came: an answer that comes at all came from the API's own bounds, so the test allows
// a minute for each, however loaded the machine, rather than the seconds they take.
func TestStuckDatabase(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()

	for _, table := range []string{"users", "idempotency_keys"} {
		t.Run("Locked_"+table, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, s.databaseURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			resp, err := http.Get(s.base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if elapsed := time.Since(start); resp.StatusCode != http.StatusOK || elapsed > stuckAnswerWithin {
				t.Fatalf("want /readyz answered 200 while the lock is held, got %d after %s", resp.StatusCode, elapsed)
			}

			start = time.Now()
			status, retryAfter, body := s.postRideWithHeader(t, "Retry-After")
			elapsed := time.Since(start)
			var problem struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal([]byte(body), &problem)
			if status != http.StatusServiceUnavailable || problem.Code != "service_unavailable" || retryAfter == "" || elapsed > stuckAnswerWithin {
				t.Fatalf("want 503 service_unavailable with Retry-After while the lock is held, got %d (Retry-After %q) after %s: %s", status, retryAfter, elapsed, body)
			}
			t.Logf("answered %d after %s", status, elapsed.Round(time.Millisecond))
		})
	}

	// With the locks gone, the same request goes through: nothing was stored that blocks it.
	if status, _, body := s.postRide(t); status != http.StatusCreated {
		t.Fatalf("want 201 once the database is free, got %d: %s", status, body)
	}
}

// stuckAnswerWithin is what TestStuckDatabase waits for an answer: far past the API's own bounds
// (seconds), so that only an API without them fails it.
const stuckAnswerWithin = time.Minute
