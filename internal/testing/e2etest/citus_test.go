package e2etest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/devenv/cituscluster"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/migrations"
)

// startCitus starts a Citus cluster of the test's own, a coordinator and two workers, and returns
// it, its coordinator's URL and what each worker's server logged (every statement it ran), or
// skips the test when Citus is not installed: no registry here serves it (docs/scale-out.md says
// how to install it).
func startCitus(t *testing.T) (c *cituscluster.Cluster, databaseURL string, workerLogs []*proctest.SyncBuffer) {
	t.Helper()
	if err := cituscluster.Installed(); errors.Is(err, cituscluster.ErrNotInstalled) {
		t.Skip("Citus is not installed for this Postgres (no citus.so); see docs/scale-out.md")
	}
	logs := []*proctest.SyncBuffer{{}, {}, {}}
	c, err := cituscluster.Start(t.Context(), cituscluster.Config{
		Settings: map[string]string{"log_statement": "all"},
		Logger: func(i int) *slog.Logger {
			return slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c, c.Coordinator.URL("postgres"), logs[1:]
}

// TestCitus runs the service on a Citus cluster: `migrate up` lays the tables out, and riders
// book, replay, are declined, resume after a failure and cancel through the real API, every one
// of whose transactions runs on one worker, with no two-phase commit; Stripe's signed webhook
// moves a ride on; then the enqueuer hands the receipts to River in two-phase commits and the
// worker sends each once. The rest of the suite runs on Citus under TEST_CITUS=1 (dbtest).
func TestCitus(t *testing.T) {
	t.Parallel()
	_, databaseURL, workers := startCitus(t)
	ctx := t.Context()

	out, errOut, code := proctest.Run(t, proctest.Build(t, "migrate"), []string{"DATABASE_URL=" + databaseURL}, "up")
	if code != 0 || !strings.Contains(out, "laid out rides for Citus") || !strings.Contains(out, "laid out staged_jobs for Citus") {
		t.Fatalf("want migrate up to lay the tables out for Citus, got %d:\n%s%s", code, out, errOut)
	}

	const webhookSecret = "whsec_citus"
	apiPort := proctest.FreePort(t)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	stripe := proctest.Start(t, proctest.Build(t, "fakestripe"), []string{
		"STRIPE_WEBHOOK_URL=" + apiURL + "/webhooks/stripe", "STRIPE_WEBHOOK_SECRET=" + webhookSecret,
	}, "-addr", "127.0.0.1:0")
	stripeURL := strings.TrimSpace(proctest.WaitOutput(t, stripe, "http://", 10*time.Second))
	env := []string{"DATABASE_URL=" + databaseURL, "STRIPE_API_KEY=sk_test_citus", "STRIPE_API_URL=" + stripeURL,
		"STRIPE_WEBHOOK_SECRET=" + webhookSecret, "RATE_LIMITS=off", "API_TOKEN_SECRET=" + ridetest.TokenSecret}
	admin := proctest.Build(t, "admin")
	rider := createRider(t, admin, env, "citus@example.com")
	outDeclined, errDeclined, code := proctest.Run(t, admin, env, "create-user", "-email", "declined@example.com", "-card", "tok_chargeCustomerFail")
	if code != 0 {
		t.Fatalf("create-user exited %d: %s", code, errDeclined)
	}
	declinedToken := strings.Split(strings.Split(outDeclined, `"token":"`)[1], `"`)[0]

	api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", apiPort), "SIMULATE_ERRORS=true"))
	proctest.WaitHTTP(t, api, apiURL+"/readyz", 15*time.Second)
	logged := func() []int {
		var n []int
		for _, w := range workers {
			n = append(n, len(w.String()))
		}
		return n
	}
	before := logged()

	c := &client.Client{BaseURL: apiURL, Token: rider}
	params := client.RideParams{OriginLat: 37.7749, OriginLon: -122.4194, TargetLat: 37.3382, TargetLon: -121.8863}
	booked, err := c.CreateRideWithKey(ctx, "citus-ride-0000000000001", params)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.CreateRideWithKey(ctx, "citus-ride-0000000000001", params); err != nil || !again.Replayed || again.Ride.ID != booked.Ride.ID {
		t.Fatalf("want the booking replayed, got %+v, %v", again, err)
	}
	var apiErr *client.APIError
	declined := &client.Client{BaseURL: apiURL, Token: declinedToken}
	if _, err := declined.CreateRide(ctx, params); !errors.As(err, &apiErr) || apiErr.Code != "card_declined" {
		t.Fatalf("want card_declined, got %v", err)
	}
	failing := params
	failing.RaiseError = true
	// The client retries the 500 until it gives up; each try stopped right after ride_created.
	impatient := &client.Client{BaseURL: apiURL, Token: rider, MaxElapsed: time.Second}
	var unknown *client.UnknownOutcomeError
	if _, err := impatient.CreateRideWithKey(ctx, "citus-ride-0000000000002", failing); !errors.As(err, &unknown) {
		t.Fatalf("want the simulated failure, got %v", err)
	}
	resumed, err := c.CreateRideWithKey(ctx, "citus-ride-0000000000002", params)
	if err != nil || resumed.Ride.StripeChargeID == nil {
		t.Fatalf("want the failed request resumed and charged, got %+v, %v", resumed, err)
	}
	cancelled, err := c.CancelRideWithKey(ctx, "citus-cancel-00000000001", booked.Ride.ID)
	if err != nil || cancelled.Ride.Status != "cancelled" {
		t.Fatalf("want the ride cancelled, got %+v, %v", cancelled, err)
	}

	// A transaction that wrote on two workers would have been committed in two phases.
	for i, w := range workers {
		ran := w.String()[before[i]:]
		if n := strings.Count(ran, "PREPARE TRANSACTION"); n != 0 {
			t.Errorf("worker %d: want every ride transaction on one worker, got %d two-phase commits", i+1, n)
		}
	}
	serializable := 0
	for i, w := range workers {
		serializable += strings.Count(w.String()[before[i]:], "ISOLATION LEVEL SERIALIZABLE")
	}
	if serializable == 0 {
		t.Error("want the atomic phases to run SERIALIZABLE on the workers, found none in their logs")
	}

	// Stripe's webhook reaches the rides on the workers: a refund at the dashboard marks the ride
	// refunded; the cancelled ride's own refund leaves it cancelled.
	stripeControl(t, stripeURL, "/_fakestripe/charges/"+*resumed.Ride.StripeChargeID+"/refund", nil)
	waitFor(t, "the dashboard refund to reach the ride", func() bool {
		ride, err := c.GetRide(ctx, resumed.Ride.ID)
		return err == nil && ride.Status == "refunded"
	})
	if ride, err := c.GetRide(ctx, booked.Ride.ID); err != nil || ride.Status != "cancelled" {
		t.Errorf("want the cancelled ride to stay cancelled, got %+v, %v", ride, err)
	}

	// The enqueuer's transaction inserts River's jobs on the coordinator and deletes the staged
	// rows on a worker. Committed in one phase, the worker's part commits first, and a coordinator
	// dying before its own commit would lose the jobs. Its delete spans every shard, which Citus
	// always commits in two phases, the coordinator's commit deciding for all: the workers' logs
	// show it.
	beforeEnqueuer := logged()
	proctest.Start(t, proctest.Build(t, "enqueuer"), env)
	worker := proctest.Start(t, proctest.Build(t, "worker"), env)
	waitFor(t, "both ride receipts and the refund receipt", func() bool {
		return strings.Count(worker.Output(), "Worker: logged receipt") == 2 &&
			strings.Count(worker.Output(), "Worker: logged refund receipt") == 1
	})
	for i, w := range workers {
		ran := w.String()[beforeEnqueuer[i]:]
		if !strings.Contains(ran, "PREPARE TRANSACTION") || !strings.Contains(ran, "COMMIT PREPARED") {
			t.Errorf("worker %d: want the enqueuer's hand-off to River committed in two phases, found no PREPARE TRANSACTION and COMMIT PREPARED", i+1)
		}
	}
	for _, id := range []string{booked.Ride.ID, resumed.Ride.ID} {
		ride, err := c.GetRide(ctx, id)
		if err != nil || ride.ReceiptSentAt == nil {
			t.Errorf("want ride %s's receipt recorded, got %+v, %v", id, ride, err)
		}
	}
}

// TestCitusWorkersGoDown plays TestMurphyDatabaseGoesDown with the workers going down instead,
// the coordinator staying up: while they are down, every attempt gets 503 service_unavailable
// (Citus reports a worker it cannot reach as a connection failure, 08006), and once they are back
// the client's retries book the ride, once. /readyz, which asks the coordinator, stays ready:
// every replica would fail alike, and a load balancer with no ready replica would answer in our
// stead, without Retry-After.
func TestCitusWorkersGoDown(t *testing.T) {
	t.Parallel()
	c, databaseURL, _ := startCitus(t)
	if err := migrations.Up(t.Context(), databaseURL); err != nil {
		t.Fatal(err)
	}
	playDatabaseGoesDown(t, databaseURL, false, c.Workers...)
}
