package e2etest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/client"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestReceiptsRideNotifications books rides back to back with the enqueuer's and the worker's
// polls an hour apart, so that only notifications can move a receipt: the API's NOTIFY after
// each commit wakes the enqueuer, and River's insert notification wakes the worker. Every receipt must
// reach the mail server all the same: with River's default insert notification cooldown of
// 100 ms, the receipts of the last bookings would wait for the worker's poll. No timing is
// asserted, beyond the wait for receipts being far shorter than a poll.
//
// The worker's rocketrides_receipt_latency_seconds then holds one latency per receipt, measured
// from when each ride's receipt was staged, which the enqueuer carried over.
func TestReceiptsRideNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBase(t, "notified@example.com")
	env, mail := b.env, b.mail

	port := proctest.FreePort(t)
	api := proctest.Start(t, proctest.Build(t, "api"), append(env, fmt.Sprintf("PORT=%d", port)))
	enqueuer := proctest.Start(t, proctest.Build(t, "enqueuer"), append(env, "ENQUEUER_POLL_INTERVAL=1h"))
	worker := proctest.Start(t, proctest.Build(t, "worker"), append(env, "WORKER_POLL_INTERVAL=1h", "METRICS_ADDR=127.0.0.1:0"))
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	proctest.WaitHTTP(t, api, apiURL+"/readyz", 15*time.Second)
	workerMetrics := proctest.MetricsURL(t, worker)

	const rides = 10
	booker := &client.Client{BaseURL: apiURL, Token: b.riderToken}
	for i := range rides {
		params := client.RideParams{OriginLat: 37.7, OriginLon: -122.4, TargetLat: 37.8, TargetLon: -122.2}
		if _, err := booker.CreateRide(ctx, params); err != nil {
			t.Fatalf("ride %d: %s", i, err)
		}
	}

	// Milliseconds each when notifications work; a receipt left for a poll never comes.
	deadline := time.Now().Add(30 * time.Second)
	for len(mail.Messages()) < rides {
		if time.Now().After(deadline) {
			t.Fatalf("want %d receipts at the mail server, got %d after 30 s, with polls an hour apart\nenqueuer:\n%s\nworker:\n%s",
				rides, len(mail.Messages()), enqueuer.Output(), worker.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}

	text := proctest.WaitMetrics(t, worker, workerMetrics, map[string]float64{
		`rocketrides_receipts_total{result="sent"}`:             rides,
		`rocketrides_receipt_latency_seconds_count`:             rides,
		`rocketrides_receipt_latency_seconds_bucket{le="+Inf"}`: rides,
	}, 10*time.Second)
	if sum, _ := proctest.MetricValue(text, "rocketrides_receipt_latency_seconds_sum"); sum <= 0 || sum > 30*rides {
		t.Fatalf("want each receipt's latency, from staged to the mail server, within the 30 s waited; got a sum of %.3f s", sum)
	}
}
