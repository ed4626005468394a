package migrations_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestRideDeclined: migration 00016 marks declined the rides that were declined before it (those
// whose booking stored a 402, and those whose key was reaped with no record for review), leaves
// every other ride as it was, refuses a declined ride with a charge, and goes down and up again.
func TestRideDeclined(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, provider := migrated(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := provider.DownTo(ctx, 15); err != nil {
		t.Fatalf("error migrating down to 00015: %v", err)
	}

	// The rides of the release before, by their booking: ride 1 declined (a stored 402), 2
	// charged (a stored 201), 3 still being booked, 4 sent to review (a stored 500), 5 declined
	// and its key reaped, 6 sent to review and its key reaped.
	for _, sql := range []string{
		`INSERT INTO users (id, email, stripe_customer_id, api_token_hash)
			VALUES (1, 'rider@rocketrides.example', 'cus_1', sha256('token'))`,
		`INSERT INTO idempotency_keys (id, idempotency_key, request_method, request_params, request_path,
			origin_ip, recovery_point, stripe_idempotency_key, user_id, response_code, response_body)
		VALUES (1, 'declined-key-0123456789', 'POST', '{}', '/rides', '127.0.0.1', 'finished', 'stripe-key-1-0123456789', 1,
				402, '{"status": 402, "code": "card_declined"}'),
			(2, 'charged-key-01234567890', 'POST', '{}', '/rides', '127.0.0.1', 'finished', 'stripe-key-2-0123456789', 1,
				201, '{"message": "Ride booked"}'),
			(3, 'in-flight-key-012345678', 'POST', '{}', '/rides', '127.0.0.1', 'ride_created', 'stripe-key-3-0123456789', 1,
				NULL, NULL),
			(4, 'review-key-012345678901', 'POST', '{}', '/rides', '127.0.0.1', 'finished', 'stripe-key-4-0123456789', 1,
				500, '{"status": 500, "code": "payment_needs_review"}')`,
		`INSERT INTO rides (id, idempotency_key_id, origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (1, 1, 0, 0, 1, 1, NULL, 1), (2, 2, 0, 0, 1, 1, 'ch_2', 1), (3, 3, 0, 0, 1, 1, NULL, 1),
			(4, 4, 0, 0, 1, 1, NULL, 1), (5, NULL, 0, 0, 1, 1, NULL, 1), (6, NULL, 0, 0, 1, 1, NULL, 1)`,
		`INSERT INTO abandoned_requests (reason, idempotency_key_id, idempotency_key, user_id, request_params,
			recovery_point, key_created_at, key_last_run_at, ride_id)
		VALUES ('stripe_replayed_error', 4, 'review-key-012345678901', 1, '{}', 'ride_created', now(), now(), 4),
			('reaped_unfinished', NULL, 'reaped-key-012345678901', 1, '{}', 'ride_created', now(), now(), 6)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("error migrating up: %v", err)
	}

	statuses := func() map[int64]string {
		t.Helper()
		got := map[int64]string{}
		rows, _ := conn.Query(ctx, `SELECT id, status FROM rides`)
		var (
			id     int64
			status string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error { got[id] = status; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := map[int64]string{1: "declined", 2: "booked", 3: "booked", 4: "booked", 5: "declined", 6: "booked"}
	if got := statuses(); len(got) != len(want) || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] ||
		got[4] != want[4] || got[5] != want[5] || got[6] != want[6] {
		t.Fatalf("want rides %v, got %v", want, got)
	}

	var pgErr *pgconn.PgError
	if _, err := conn.Exec(ctx, `UPDATE rides SET stripe_charge_id = 'ch_1' WHERE id = 1`); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("want a declined ride with a charge refused, got %v", err)
	}

	if _, err := provider.DownTo(ctx, 15); err != nil {
		t.Fatalf("error migrating down to 00015: %v", err)
	}
	if got := statuses(); got[1] != "booked" || got[5] != "booked" {
		t.Fatalf("want the declined rides booked again for the release before, got %v", got)
	}
	if _, err := provider.Up(ctx); err != nil {
		t.Fatalf("error migrating up again: %v", err)
	}
	if got := statuses(); got[1] != "declined" || got[5] != "declined" {
		t.Fatalf("want the declined rides declined again, got %v", got)
	}
}
