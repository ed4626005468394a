package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestWebhooksReachTheAPI runs the conversation with Stripe on real processes: the stand-in
// signs and delivers what happens to its charges to the API's webhook, each event twice and in
// reverse order, as Stripe may; the API applies each once, and the rider's app reads the
// outcome back. A ride cancelled by its rider stays cancelled when Stripe reports its refund; a
// charge refunded at the dashboard shows refunded; a dispute shows disputed.
func TestWebhooksReachTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const secret = "whsec_e2e_webhooks"
	apiPort := proctest.FreePort(t)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", apiPort)

	stripe := proctest.Start(t, proctest.Build(t, "fakestripe"), []string{
		"STRIPE_WEBHOOK_URL=" + apiURL + "/webhooks/stripe", "STRIPE_WEBHOOK_SECRET=" + secret,
	}, "-addr", "127.0.0.1:0")
	stripeURL := strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 10*time.Second))
	stripeControl(t, stripeURL, "/_fakestripe/webhooks", map[string]any{"duplicate": 1, "reorder": true})

	databaseURL := dbtest.NewDB(t)
	env := []string{"DATABASE_URL=" + databaseURL, "STRIPE_API_KEY=sk_test_e2e", "STRIPE_API_URL=" + stripeURL,
		"STRIPE_WEBHOOK_SECRET=" + secret, "RATE_LIMITS=off", "API_TOKEN_SECRET=" + ridetest.TokenSecret}
	token := createRider(t, proctest.Build(t, "admin"), env, "webhooks@example.com")
	api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", apiPort)))
	proctest.WaitHTTP(t, api, apiURL+"/readyz", 15*time.Second)

	c := &client.Client{BaseURL: apiURL, Token: token}
	book := func() *client.Ride {
		res, err := c.CreateRide(ctx, client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863})
		if err != nil {
			t.Fatal(err)
		}
		return res.Ride
	}
	cancelled, refunded, disputed := book(), book(), book()

	if res, err := c.CancelRide(ctx, cancelled.ID); err != nil || res.Ride.Status != "cancelled" {
		t.Fatalf("want the ride cancelled, got %+v, %v", res, err)
	}
	stripeControl(t, stripeURL, "/_fakestripe/charges/"+*refunded.StripeChargeID+"/refund", nil)
	stripeControl(t, stripeURL, "/_fakestripe/charges/"+*disputed.StripeChargeID+"/dispute", nil)

	want := map[string]string{cancelled.ID: "cancelled", refunded.ID: "refunded", disputed.ID: "disputed"}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Three charges, two refunds and a dispute, each event delivered twice: 12 deliveries.
	waitFor(t, "every event delivered twice and answered 200", func() bool {
		var hooks struct {
			Deliveries []struct {
				EventType string `json:"event_type"`
				Delivered bool   `json:"delivered"`
				Status    int    `json:"status"`
			} `json:"deliveries"`
		}
		stripeControlGet(t, stripeURL, "/_fakestripe/webhooks", &hooks)
		ok := 0
		for _, d := range hooks.Deliveries {
			if d.Delivered && d.Status == http.StatusOK {
				ok++
			}
		}
		return ok == 12
	})
	for id, status := range want {
		ride, err := c.GetRide(ctx, id)
		if err != nil || string(ride.Status) != status {
			t.Errorf("want ride %s %s, got %+v, %v", id, status, ride, err)
		}
	}
	var events, applied int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(ride_id) FROM stripe_events`).Scan(&events, &applied); err != nil {
		t.Fatal(err)
	}
	if events != 3 || applied != 3 {
		t.Errorf("want the 2 refunds and the dispute recorded once each with their ride, got %d events, %d with a ride", events, applied)
	}
	if n := strings.Count(api.Output(), "API: Stripe event received"); n != 12 {
		t.Errorf("want each of the 12 deliveries logged, got %d", n)
	}
}

// stripeControl posts body (nil: none) to the stand-in's control API and requires a 200.
func stripeControl(t *testing.T, stripeURL, path string, body any) {
	t.Helper()
	var reader *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(b)
	} else {
		reader = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, stripeURL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

// stripeControlGet reads the stand-in's control API into out.
func stripeControlGet(t *testing.T, stripeURL, path string, out any) {
	t.Helper()
	resp, err := http.Get(stripeURL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
