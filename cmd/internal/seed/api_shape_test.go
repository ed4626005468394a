package seed_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/cmd/internal/seed"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/workers"
)

// TestSeedLooksLikeTheAPI books a ride through the real phases, records its receipt as the
// worker does, seeds beside it, and holds every seeded row to the booked one: the same columns
// set and unset, the same JSON in the jsonb columns, and the same values where every finished
// ride has the same. Should the API start writing a column the seed does not, this fails.
func TestSeedLooksLikeTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := ridetest.Setup(t)

	executor := phases.New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), phases.Config{})
	idempotencyKey, err := client.NewIdempotencyKey()
	if err != nil {
		t.Fatal(err)
	}
	outcome, err := executor.CreateRide(ctx, &phases.CreateRideRequest{
		KeyedRequest: phases.KeyedRequest{
			User:           b.Rider.User,
			IdempotencyKey: idempotencyKey,
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: phases.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863},
	})
	if err != nil || outcome.StatusCode != 201 {
		t.Fatalf("want the ride booked, got %+v, %v", outcome, err)
	}
	booked, err := models.RideGetByIdempotencyKeyID(ctx, b.Pool, b.Rider.ID, mustKeyID(t, b, b.Rider.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := models.RideReceiptRecord(ctx, b.Pool, booked.UserID, booked.ID, workers.ReceiptMessageID(booked, "rocketrides.example")); err != nil {
		t.Fatal(err)
	}

	if _, err := seed.Seed(ctx, b.Pool, seed.Options{Rides: 5, Riders: 2}); err != nil {
		t.Fatalf("error seeding: %v", err)
	}

	for _, tt := range []struct {
		table      string
		userColumn string
		sameValues []string // columns (or paths into jsonb ones) every finished ride has the same value in
	}{
		{"idempotency_keys", "user_id", []string{"request_method", "request_path", "response_code", "recovery_point", "response_body.message"}},
		{"rides", "user_id", nil},
		{"audit_records", "user_id", []string{"action", "resource_type"}},
		{"users", "id", nil},
	} {
		t.Run(tt.table, func(t *testing.T) {
			rows := b.Pool.QueryRow(ctx, fmt.Sprintf(`
				SELECT jsonb_agg(to_jsonb(t)) FILTER (WHERE t.%[2]s = $1),
				       jsonb_agg(to_jsonb(t)) FILTER (WHERE t.%[2]s NOT IN ($1, $2))
				FROM %[1]s t`, tt.table, tt.userColumn), b.Rider.ID, b.DecliningRider.ID)
			var api, seeded []map[string]any
			if err := rows.Scan(&api, &seeded); err != nil {
				t.Fatal(err)
			}
			if len(api) != 1 || len(seeded) == 0 {
				t.Fatalf("want one row the API wrote and some the seed wrote, got %d and %d", len(api), len(seeded))
			}
			want := shape(api[0])
			for _, row := range seeded {
				if got := shape(row); !reflect.DeepEqual(got, want) {
					t.Errorf("seeded row\n%v\nhas the shape\n%v\nwhere the API's row\n%v\nhas\n%v", row, got, api[0], want)
				}
				for _, path := range tt.sameValues {
					if got, want := lookup(row, path), lookup(api[0], path); got != want {
						t.Errorf("seeded %s %v, the API's %v", path, got, want)
					}
				}
			}
		})
	}
}

// shape is a row of to_jsonb with every value replaced by its JSON type, objects (the jsonb
// columns) kept as objects: what a row has set and unset, and what its JSON holds.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		s := make(map[string]any, len(v))
		for k, x := range v {
			s[k] = shape(x)
		}
		return s
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// lookup returns the value at a dotted path into a row of to_jsonb, nil if there is none.
func lookup(row map[string]any, path string) any {
	var v any = row
	for _, name := range strings.Split(path, ".") {
		object, _ := v.(map[string]any)
		v = object[name]
	}
	return v
}

func mustKeyID(t *testing.T, b *ridetest.Bundle, userID int64) int64 {
	t.Helper()
	var id int64
	if err := b.Pool.QueryRow(t.Context(), "SELECT id FROM idempotency_keys WHERE user_id = $1", userID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
