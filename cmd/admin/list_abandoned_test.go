package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

func TestListAbandoned(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url}

	t.Run("EmptyShowsOnlyTheHeader", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "list-abandoned")
		if code != 0 || strings.TrimSpace(out) == "" || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("want the header alone, got %d %q %s", code, out, errOut)
		}
		if out, _, code := proctest.Run(t, admin, env, "list-abandoned", "-json"); code != 0 || out != "" {
			t.Fatalf("want no JSON lines, got %d %q", code, out)
		}
	})

	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, sql := range []string{
		`INSERT INTO users (email, stripe_customer_id, api_token_hash)
			VALUES ('rider@example.com', 'cus_A', sha256('token'))`,
		`INSERT INTO abandoned_requests (created_at, reason, idempotency_key, user_id, request_params,
			recovery_point, last_error, key_created_at, key_last_run_at, ride_id)
		VALUES
			(now() - interval '2 days', 'stripe_idempotency_key_expired', 'older-key-0123456789', 1,
				'{"origin_lat": 1, "origin_lon": 2, "target_lat": 3, "target_lon": 4}', 'ride_created',
				'payment processor unavailable: ' || repeat('x', 100), now() - interval '3 days', now() - interval '2 days', NULL),
			(now() - interval '1 day', 'reaped_unfinished', 'newer-key-0123456789', 1,
				'{"origin_lat": 5, "origin_lon": 6, "target_lat": 7, "target_lon": 8}', 'started',
				NULL, now() - interval '4 days', now() - interval '4 days', NULL)`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("JSONNewestFirst", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "list-abandoned", "-json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("want one line per request, got %q", out)
		}
		var newer, older struct {
			Reason         string             `json:"reason"`
			IdempotencyKey string             `json:"idempotency_key"`
			UserID         int64              `json:"user_id"`
			RecoveryPoint  string             `json:"recovery_point"`
			LastError      *string            `json:"last_error"`
			RequestParams  map[string]float64 `json:"request_params"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &newer); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &older); err != nil {
			t.Fatal(err)
		}
		if newer.IdempotencyKey != "newer-key-0123456789" || newer.Reason != "reaped_unfinished" ||
			newer.RecoveryPoint != "started" || newer.UserID != 1 || newer.LastError != nil || newer.RequestParams["target_lon"] != 8 {
			t.Fatalf("want the newer request first, got %s", lines[0])
		}
		if older.IdempotencyKey != "older-key-0123456789" || older.Reason != "stripe_idempotency_key_expired" ||
			older.LastError == nil || len(*older.LastError) != 131 {
			t.Fatalf("want the older request second with its whole error, got %s", lines[1])
		}
	})

	t.Run("TableForReading", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "list-abandoned")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "RECORDED") ||
			!strings.Contains(lines[1], "reaped_unfinished") || !strings.Contains(lines[1], "newer-key-0123456789") ||
			!strings.Contains(lines[2], "stripe_idempotency_key_expired") || !strings.Contains(lines[2], "payment processor unavailable") ||
			strings.Contains(lines[2], strings.Repeat("x", 100)) {
			t.Fatalf("want a header and one line per request, newest first, long errors cut short; got\n%s", out)
		}
	})

	t.Run("Limit", func(t *testing.T) {
		out, _, code := proctest.Run(t, admin, env, "list-abandoned", "-json", "-limit", "1")
		if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "newer-key-0123456789") {
			t.Fatalf("want the newest request alone, got %d %q", code, out)
		}
		if _, errOut, code := proctest.Run(t, admin, env, "list-abandoned", "-limit", "0"); code == 0 || !strings.Contains(errOut, "-limit") {
			t.Fatalf("want -limit 0 refused, got %d %s", code, errOut)
		}
	})
}
