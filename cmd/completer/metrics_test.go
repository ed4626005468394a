package main

import (
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// TestMetrics runs the completer with METRICS_ADDR on two abandoned requests, one of which
// meets a Stripe 500 again, beside a request recorded for review, and scrapes what it did: the
// keys by result, its Stripe calls, and the requests awaiting review.
func TestMetrics(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "completer")
	b := ridetest.Setup(t)
	failing := abandon(t, b, b.Rider, "cmd-completer-key-failing")
	abandon(t, b, b.NewRider(t, "tok_visa"), "cmd-completer-key-finishing")
	// The least recently run key goes first, and meets Stripe's next 500.
	b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '3 minutes' WHERE id = $1`, failing.ID)
	b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
	b.Exec(t, `INSERT INTO abandoned_requests (reason, idempotency_key, user_id, request_params,
		recovery_point, key_created_at, key_last_run_at)
		VALUES ('reaped_unfinished', 'cmd-completer-key-reaped', $1, '{}', 'ride_created', now(), now())`, b.Rider.ID)

	p := proctest.Start(t, bin, env(b, "COMPLETER_INTERVAL=100ms", "METRICS_ADDR=127.0.0.1:0"))
	proctest.WaitMetrics(t, p, proctest.MetricsURL(t, p), map[string]float64{
		`rocketrides_completer_keys_total{result="succeeded"}`:                          1,
		`rocketrides_completer_keys_total{result="failed"}`:                             1,
		`rocketrides_stripe_requests_total{result="succeeded"}`:                         1,
		`rocketrides_stripe_requests_total{result="server_error"}`:                      1,
		`rocketrides_requests_awaiting_review{reason="reaped_unfinished"}`:              1,
		`rocketrides_requests_awaiting_review{reason="stripe_idempotency_key_expired"}`: 0,
	}, 30*time.Second)
}
