package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/phases"
)

// TestPrintsTheAPIsShape runs the command against the real API: the ride it prints is the API's
// own JSON of that ride, member for member, and a declined booking is refused, and listed by the
// API as declined, never as booked.
func TestPrintsTheAPIsShape(t *testing.T) {
	t.Parallel()
	b := ridetest.Setup(t)
	logger := slog.New(slog.DiscardHandler)
	executor := phases.New(b.Pool, b.StripeClient, logger, phases.Config{})
	server := httptest.NewServer(api.NewServer(b.Pool, executor, logger,
		api.Config{Limits: api.Limits{Off: true}, TokenKey: ridetest.TokenKey}).Handler())
	t.Cleanup(server.Close)

	// rides runs the command as rider and returns its exit status and the line it printed, decoded,
	// with its ride's JSON as it was printed.
	rides := func(t *testing.T, rider *ridetest.Rider, args ...string) (int, map[string]json.RawMessage) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"-api", server.URL, "-token", rider.Token}, args...)
		code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
		var out map[string]json.RawMessage
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("want one JSON line, got %q (stderr %q): %v", stdout.String(), stderr.String(), err)
		}
		return code, out
	}
	// get reads path from the API as rider, and returns the JSON member named member of its body.
	get := func(t *testing.T, rider *ridetest.Rider, path, member string) json.RawMessage {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, server.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+rider.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var members map[string]json.RawMessage
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &members) != nil || members[member] == nil {
			t.Fatalf("want 200 with %s from GET %s, got %d %s", member, path, resp.StatusCode, body)
		}
		return members[member]
	}
	// requireSameJSON fails unless printed and served have the same members with the same values.
	requireSameJSON := func(t *testing.T, printed, served json.RawMessage) {
		t.Helper()
		var p, s map[string]any
		if json.Unmarshal(printed, &p) != nil || json.Unmarshal(served, &s) != nil || !reflect.DeepEqual(p, s) {
			t.Fatalf("want the printed ride to be the API's\nprinted: %s\nserved:  %s", printed, served)
		}
	}

	t.Run("BookedAndCancelled", func(t *testing.T) {
		t.Parallel()
		key := "cmd-rides-shape-key-0123456789"
		code, out := rides(t, b.Rider, "-key", key, "-from", "37.7749,-122.4194", "-to", "37.3382,-121.8863")
		var booked struct {
			ID string `json:"id"`
		}
		if code != exitBooked || string(out["outcome"]) != `"booked"` || json.Unmarshal(out["ride"], &booked) != nil {
			t.Fatalf("want booked, got %d %v", code, out)
		}
		// A booking's 201 leaves status out, and so does the line: its ride is the 201's.
		served := bookingAnswerRide(t, server.URL, b.Rider.Token, key)
		requireSameJSON(t, out["ride"], served)
		var members map[string]any
		_ = json.Unmarshal(out["ride"], &members)
		if keys := slices.Sorted(maps.Keys(members)); !reflect.DeepEqual(keys, []string{"created_at", "id", "origin_lat",
			"origin_lon", "stripe_charge_id", "target_lat", "target_lon"}) {
			t.Fatalf("want the members of a booking's ride, got %v", keys)
		}

		code, out = rides(t, b.Rider, "-cancel", booked.ID)
		if code != exitBooked || string(out["outcome"]) != `"cancelled"` {
			t.Fatalf("want cancelled, got %d %v", code, out)
		}
		requireSameJSON(t, out["ride"], get(t, b.Rider, "/rides/"+booked.ID, "ride"))
	})

	t.Run("DeclinedIsNeverBooked", func(t *testing.T) {
		t.Parallel()
		code, out := rides(t, b.DecliningRider, "-from", "37.7749,-122.4194", "-to", "37.3382,-121.8863")
		if code != exitRefused || string(out["outcome"]) != `"refused"` || string(out["code"]) != `"card_declined"` || out["ride"] != nil {
			t.Fatalf("want refused with card_declined and no ride, got %d %v", code, out)
		}
		var list []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(get(t, b.DecliningRider, "/rides", "data"), &list); err != nil || len(list) != 1 || list[0].Status != "declined" {
			t.Fatalf("want the one ride declined, got %v, %v", list, err)
		}
	})
}

// bookingAnswerRide replays the booking of key and returns the ride of its stored 201.
func bookingAnswerRide(t *testing.T, apiURL, token, key string) json.RawMessage {
	t.Helper()
	body := `{"origin_lat": 37.7749, "origin_lon": -122.4194, "target_lat": 37.3382, "target_lon": -121.8863}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, apiURL+"/rides", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	var created struct {
		Ride json.RawMessage `json:"ride"`
	}
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" ||
		json.Unmarshal(answer, &created) != nil || created.Ride == nil {
		t.Fatalf("want the stored 201 replayed, got %d %s", resp.StatusCode, answer)
	}
	return created.Ride
}
