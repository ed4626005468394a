package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestServiceAsSeparateProcesses runs two API replicas, two workers, two enqueuers, a completer
// and a reaper, books rides through both APIs, waits until every ride's receipt was mailed and
// recorded, then stops everything with SIGTERM and requires each process to exit 0.
func TestServiceAsSeparateProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBase(t, "e2e@example.com")
	databaseURL, mail, stripeURL, env := b.databaseURL, b.mail, b.stripeURL, b.env

	var procs []*proctest.Process
	var apiURLs []string
	for range 2 {
		port := proctest.FreePort(t)
		api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", port)))
		apiURLs = append(apiURLs, fmt.Sprintf("http://127.0.0.1:%d", port))
		procs = append(procs, api)
	}
	for _, name := range []string{"worker", "worker", "enqueuer", "enqueuer", "completer", "reaper"} {
		procs = append(procs, proctest.Start(t, proctest.Build(t, name), env))
	}
	for i, url := range apiURLs {
		proctest.WaitHTTP(t, procs[i], url+"/readyz", 15*time.Second)
	}
	// The others are up once they say so: a SIGTERM at the end must find each with its signal
	// handler in place, however slowly a loaded machine starts a race-built binary.
	for _, p := range procs[len(apiURLs):] {
		proctest.WaitOutput(t, p, ": started", 30*time.Second)
	}

	// Book rides through both replicas at once; each ride is also sent again to the other
	// replica with the same key, which must replay it.
	const rides = 20
	rideIDs := make([]string, rides)
	var wg sync.WaitGroup
	for i := range rides {
		wg.Go(func() {
			params := client.RideParams{OriginLat: 37.7, OriginLon: -122.4, TargetLat: float64(i) / 10, TargetLon: -121.9}
			first := &client.Client{BaseURL: apiURLs[i%2], Token: b.riderToken}
			result, err := first.CreateRide(ctx, params)
			if err != nil {
				t.Errorf("ride %d: %s", i, err)
				return
			}
			again := &client.Client{BaseURL: apiURLs[(i+1)%2], Token: b.riderToken}
			replay, err := again.CreateRideWithKey(ctx, result.IdempotencyKey, params)
			if err != nil || !replay.Replayed || replay.Ride.ID != result.Ride.ID {
				t.Errorf("ride %d: want a replay of ride %s from the other replica, got %+v %v", i, result.Ride.ID, replay, err)
				return
			}
			rideIDs[i] = result.Ride.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Every ride's receipt gets mailed and recorded.
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var receipted int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM rides WHERE receipt_sent_at IS NOT NULL`).Scan(&receipted); err != nil {
			t.Fatal(err)
		}
		if receipted == rides {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d receipts recorded, got %d after 60 s", rides, receipted)
		}
		time.Sleep(100 * time.Millisecond)
	}

	messages := mail.Messages()
	if len(messages) != rides {
		t.Fatalf("want %d receipt emails, got %d", rides, len(messages))
	}
	for _, m := range messages {
		if len(m.To) != 1 || m.To[0] != "e2e@example.com" || !strings.Contains(string(m.Data), "$20.00") {
			t.Fatalf("unexpected receipt: to %v\n%s", m.To, m.Data)
		}
	}
	var staged, charged int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM staged_jobs), (SELECT count(DISTINCT stripe_charge_id) FROM rides)`).Scan(&staged, &charged); err != nil {
		t.Fatal(err)
	}
	if staged != 0 || charged != rides {
		t.Fatalf("want no staged job left and %d rides charged, got %d staged, %d charged", rides, staged, charged)
	}
	// Stripe's side: exactly as many charges as rides, each the one its ride records.
	var stripeState struct {
		Charges []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"charges"`
	}
	resp, err := http.Get(stripeURL + "/_fakestripe/charges")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&stripeState)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(stripeState.Charges) != rides {
		t.Fatalf("want Stripe to hold %d charges, got %d", rides, len(stripeState.Charges))
	}
	for _, charge := range stripeState.Charges {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM rides WHERE stripe_charge_id = $1`, charge.ID).Scan(&n); err != nil || n != 1 || charge.Status != "succeeded" {
			t.Fatalf("want charge %s (%s) recorded by exactly one ride, got %d (%v)", charge.ID, charge.Status, n, err)
		}
	}

	for _, p := range procs {
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range procs {
		if code := p.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM:\n%s", p.Name, code, p.Output())
		}
	}
	// A clean stop leaves nothing locked and no job running.
	for name, query := range map[string]string{
		"locked keys":  `SELECT count(*) FROM idempotency_keys WHERE locked_at IS NOT NULL`,
		"running jobs": `SELECT count(*) FROM river_job WHERE state = 'running'`,
	} {
		var n int
		if err := conn.QueryRow(ctx, query).Scan(&n); err != nil || n != 0 {
			t.Fatalf("want no %s after SIGTERM, got %d (%v)", name, n, err)
		}
	}
}
