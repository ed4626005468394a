package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestShutdownAbortsARequestStuckOnStripe stops the API while a ride request waits on a Stripe
// that never answers: the API still exits 0 within 10 s, the request is answered 503, its key is
// left unlocked at ride_created, ready for a retry to resume.
func TestShutdownAbortsARequestStuckOnStripe(t *testing.T) {
	t.Parallel()
	s := setup(t)
	control := func(method, path, body string) string {
		req, _ := http.NewRequest(method, s.stripeURL+"/_fakestripe/"+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return string(out)
	}
	control(http.MethodPost, "faults", `{"kind": "timeout", "count": 1}`)

	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, body := s.postRide(t)
		answered <- answer{status, body}
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(control(http.MethodGet, "faults", ""), `"pending_faults":[]`); {
		if time.Now().After(deadline) {
			t.Fatal("the ride request never reached Stripe")
		}
		time.Sleep(20 * time.Millisecond)
	}

	s.stop(t)
	got := <-answered
	if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, `"service_unavailable"`) {
		t.Fatalf("want 503 service_unavailable, got %d %s", got.status, got.body)
	}

	conn, err := pgx.Connect(context.Background(), s.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var point string
	var locked bool
	if err := conn.QueryRow(context.Background(), `SELECT recovery_point, locked_at IS NOT NULL FROM idempotency_keys`).Scan(&point, &locked); err != nil {
		t.Fatal(err)
	}
	if point != "ride_created" || locked {
		t.Fatalf("want the key unlocked at ride_created, got %s locked=%t", point, locked)
	}
}

// TestStopWhileWaitingForTheDatabase stops the API while it still waits for its database at
// start, as a Procfile manager stopping everything at once does: a clean exit, not a failure.
func TestStopWhileWaitingForTheDatabase(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("DATABASE_URL=postgres://postgres@127.0.0.1:%d/rocketrides?sslmode=disable&connect_timeout=1", proctest.FreePort(t))
	api := proctest.Start(t, proctest.Build(t, "api"), []string{url, "STRIPE_API_KEY=sk_test_x", "API_TOKEN_SECRET=" + ridetest.TokenSecret})
	proctest.WaitOutput(t, api, "database not reachable yet", 10*time.Second)
	api.Terminate(t, 5*time.Second)
}
