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

func TestListDisputed(t *testing.T) {
	t.Parallel()
	admin := proctest.Build(t, "admin")
	url := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + url}

	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, sql := range []string{
		`INSERT INTO users (id, email, stripe_customer_id, api_token_hash)
			VALUES (1, 'rider@example.com', 'cus_A', sha256('token'))`,
		`INSERT INTO rides (id, created_at, origin_lat, origin_lon, target_lat, target_lon, user_id, stripe_charge_id, status)
		VALUES (11, now() - interval '2 days', 1, 2, 3, 4, 1, 'ch_old', 'disputed'),
			(12, now() - interval '1 day', 1, 2, 3, 4, 1, 'ch_new', 'disputed'),
			(13, now(), 1, 2, 3, 4, 1, 'ch_fine', 'booked')`,
		`INSERT INTO stripe_events (id, type, created_at, ride_id) VALUES ('evt_1', 'charge.dispute.created', now(), 12)`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("JSONOldestFirst", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "list-disputed", "-json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("want the 2 disputed rides, got %q", out)
		}
		var first, second disputedRideJSON
		if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
			t.Fatalf("want JSON lines, got %q", out)
		}
		if first.RideID != 11 || second.RideID != 12 || *second.StripeChargeID != "ch_new" {
			t.Fatalf("want rides 11 then 12, got %+v %+v", first, second)
		}
		if first.DisputedAt != nil || second.DisputedAt == nil {
			t.Fatalf("want the dispute's arrival only where an event names the ride, got %v %v", first.DisputedAt, second.DisputedAt)
		}
	})

	t.Run("Table", func(t *testing.T) {
		out, errOut, code := proctest.Run(t, admin, env, "list-disputed", "-limit", "1")
		if code != 0 || !strings.HasPrefix(out, "RIDE") || !strings.Contains(out, "ch_old") || strings.Contains(out, "ch_new") {
			t.Fatalf("want a header and the oldest disputed ride, got %d %q %s", code, out, errOut)
		}
	})

	t.Run("BadLimit", func(t *testing.T) {
		if _, errOut, code := proctest.Run(t, admin, env, "list-disputed", "-limit", "0"); code == 0 || !strings.Contains(errOut, "-limit") {
			t.Fatalf("want a usage error naming -limit, got %d %s", code, errOut)
		}
	})
}
