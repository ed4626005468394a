package e2etest

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/phases"
)

// process is one of the service's commands as TestProcesses runs it: with the work prepare made
// waiting for it, and what it must make of that work.
type process struct {
	name    string // the command
	logName string // its log lines' prefix

	// prepare makes the process's work in b's database and returns the environment it needs
	// beyond DATABASE_URL, and a check of what became of the work once it is done.
	prepare func(t *testing.T, b *ridetest.Bundle) (env []string, check func(t *testing.T))

	once     string             // the line -once prints for the prepared work; empty: no -once (the API)
	onceIdle string             // and for a second pass, which finds nothing left
	metrics  map[string]float64 // what a long-running process's METRICS_ADDR shows once it is done
}

var processes = []process{
	{
		name: "api", logName: "API",
		prepare: func(t *testing.T, b *ridetest.Bundle) ([]string, func(*testing.T)) {
			env := []string{fmt.Sprintf("PORT=%d", proctest.FreePort(t)),
				"STRIPE_API_KEY=" + ridetest.StripeAPIKey, "STRIPE_API_URL=" + b.Stripe.URL, "API_TOKEN_SECRET=" + ridetest.TokenSecret}
			return env, func(*testing.T) {}
		},
		// Its work comes from riders, whom the API's own tests play (cmd/api, api); here, that
		// it serves its series from the start.
		metrics: map[string]float64{
			`rocketrides_ride_requests_total{outcome="created"}`: 0,
			`rocketrides_db_pool_max_conns`:                      16,
		},
	},
	{
		name: "enqueuer", logName: "Enqueuer",
		prepare: func(t *testing.T, b *ridetest.Bundle) ([]string, func(*testing.T)) {
			b.Exec(t, `
				INSERT INTO staged_jobs (job_name, job_args, user_id)
				SELECT 'send_ride_receipt', jsonb_build_object('ride_id', i::text, 'user_id', 1, 'amount', 2000, 'currency', 'usd'), 1
				FROM generate_series(1, 2) AS i`)
			return nil, func(t *testing.T) {
				if n := b.Count(t, `SELECT count(*) FROM river_job`); n != 2 {
					t.Errorf("want both staged jobs in River, got %d", n)
				}
				if n := b.Count(t, `SELECT count(*) FROM staged_jobs`); n != 0 {
					t.Errorf("want nothing left staged, got %d", n)
				}
			}
		},
		once:     `{"enqueued":2,"failed":0}`,
		onceIdle: `{"enqueued":0,"failed":0}`,
		metrics: map[string]float64{
			"rocketrides_enqueued_jobs_total":         2,
			"rocketrides_staged_jobs_set_aside_total": 0,
			"rocketrides_staged_jobs":                 0,
		},
	},
	{
		name: "worker", logName: "Worker",
		prepare: func(t *testing.T, b *ridetest.Bundle) ([]string, func(*testing.T)) {
			rideID := insertChargedRide(t, b)
			client, err := river.NewClient(riverpgxv5.New(b.Pool), &river.Config{}) // insert-only, as the enqueuer's
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Insert(t.Context(), jobargs.SendRideReceipt{
				RideID: rideID, UserID: b.Rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency,
			}, nil); err != nil {
				t.Fatal(err)
			}
			mail := smtptest.NewServer(t, smtptest.Options{})
			return []string{"SMTP_URL=" + mail.URL()}, func(t *testing.T) {
				msgs := mail.Messages()
				if len(msgs) != 1 || msgs[0].To[0] != b.Rider.Email {
					t.Fatalf("want one receipt mailed to the rider, got %+v", msgs)
				}
				if text, err := msgs[0].Text(); err != nil || !strings.Contains(text, "$20.00") {
					t.Errorf("want the receipt to say $20.00, got %q (%v)", text, err)
				}
				if n := b.Count(t, `SELECT count(*) FROM rides WHERE id = $1 AND receipt_sent_at IS NOT NULL`, rideID); n != 1 {
					t.Error("want the receipt recorded")
				}
			}
		},
		once:     `{"completed":1,"failed":0,"discarded":0,"cancelled":0}`,
		onceIdle: `{"completed":0,"failed":0,"discarded":0,"cancelled":0}`,
		metrics: map[string]float64{
			`rocketrides_receipts_total{result="sent"}`:   1,
			`rocketrides_receipts_total{result="failed"}`: 0,
			`rocketrides_river_jobs{state="available"}`:   0,
			`rocketrides_river_jobs{state="running"}`:     0,
		},
	},
	{
		name: "completer", logName: "Completer",
		prepare: func(t *testing.T, b *ridetest.Bundle) ([]string, func(*testing.T)) {
			failing := abandonRequest(t, b, b.Rider, "processes-key-failing")
			finishing := abandonRequest(t, b, b.NewRider(t, "tok_visa"), "processes-key-finishing")
			// The least recently run key goes first, and meets Stripe's next 500.
			b.Exec(t, `UPDATE idempotency_keys SET last_run_at = now() - interval '3 minutes' WHERE idempotency_key = $1`, failing)
			b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
			// And a request the reaper recorded for a person, which the completer's gauge shows.
			b.Exec(t, `INSERT INTO abandoned_requests (reason, idempotency_key, user_id, request_params,
				recovery_point, key_created_at, key_last_run_at)
				VALUES ('reaped_unfinished', 'processes-key-reaped', $1, '{}', 'ride_created', now(), now())`, b.Rider.ID)
			env := []string{"STRIPE_API_KEY=" + ridetest.StripeAPIKey, "STRIPE_API_URL=" + b.Stripe.URL, "COMPLETER_INTERVAL=100ms"}
			return env, func(t *testing.T) {
				for key, want := range map[string]string{finishing: "finished", failing: "ride_created"} {
					if n := b.Count(t, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key = $1 AND recovery_point = $2`, key, want); n != 1 {
						t.Errorf("want key %s at %s", key, want)
					}
				}
				if n := len(b.SucceededCharges()); n != 1 {
					t.Errorf("want 1 charge, got %d", n)
				}
			}
		},
		once:     `{"succeeded":1,"failed":1}`,
		onceIdle: `{"succeeded":0,"failed":0}`,
		metrics: map[string]float64{
			`rocketrides_completer_keys_total{result="succeeded"}`:                          1,
			`rocketrides_completer_keys_total{result="failed"}`:                             1,
			`rocketrides_stripe_requests_total{result="succeeded"}`:                         1,
			`rocketrides_stripe_requests_total{result="server_error"}`:                      1,
			`rocketrides_requests_awaiting_review{reason="reaped_unfinished"}`:              1,
			`rocketrides_requests_awaiting_review{reason="stripe_idempotency_key_expired"}`: 0,
		},
	},
	{
		name: "reaper", logName: "Reaper",
		prepare: func(t *testing.T, b *ridetest.Bundle) ([]string, func(*testing.T)) {
			abandonRequest(t, b, b.Rider, "processes-key-unfinished")
			finishRequest(t, b, "processes-key-finished")
			b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '73 hours'`)
			return nil, func(t *testing.T) {
				if n := b.Count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
					t.Errorf("want every key reaped, %d left", n)
				}
				if n := b.Count(t, `SELECT count(*) FROM abandoned_requests WHERE idempotency_key = 'processes-key-unfinished'`); n != 1 {
					t.Errorf("want the unfinished key recorded for a person, got %d records", n)
				}
			}
		},
		once:     `{"reaped":2,"abandoned":1}`,
		onceIdle: `{"reaped":0,"abandoned":0}`,
		metrics: map[string]float64{
			`rocketrides_reaper_keys_total{result="finished"}`:  1,
			`rocketrides_reaper_keys_total{result="abandoned"}`: 1,
		},
	},
}

// TestProcesses runs each long-running command of the service on work made for it, as its real
// binary. With -once (each background process), it does the work, prints exactly one JSON line
// of counts, and exits 0, and a second pass finds nothing left. Running for good, with
// METRICS_ADDR, it does the work and counts it in its metrics; SIGTERM stops it within the 10 s
// every process promises, with status 0 and a line saying so, and leaves no connection to the
// database behind.
func TestProcesses(t *testing.T) {
	t.Parallel()
	for _, process := range processes {
		t.Run(process.name, func(t *testing.T) {
			t.Parallel()
			bin := proctest.Build(t, process.name)

			if process.once != "" {
				t.Run("Once", func(t *testing.T) {
					t.Parallel()
					b := ridetest.Setup(t)
					extra, check := process.prepare(t, b)
					env := append([]string{"DATABASE_URL=" + b.Pool.Config().ConnString()}, extra...)
					for _, want := range []string{process.once, process.onceIdle} {
						stdout, stderr, code := proctest.Run(t, bin, env, "-once")
						if code != 0 || stdout != want+"\n" {
							t.Fatalf("want exit 0 and the one line %s, got %d, stdout %q, stderr:\n%s", want, code, stdout, stderr)
						}
					}
					check(t)
				})
			}

			t.Run("RunsUntilSIGTERM", func(t *testing.T) {
				t.Parallel()
				b := ridetest.Setup(t)
				extra, check := process.prepare(t, b)
				// Its connections carry a name of their own, so that the test can tell them from
				// its own.
				url := b.Pool.Config().ConnString() + "&application_name=process_under_test"
				env := append([]string{"DATABASE_URL=" + url, "METRICS_ADDR=127.0.0.1:0"}, extra...)
				p := proctest.Start(t, bin, env)
				proctest.WaitMetrics(t, p, proctest.MetricsURL(t, p), process.metrics, 30*time.Second)
				check(t)

				p.Terminate(t, 10*time.Second)
				if !strings.Contains(p.Output(), process.logName+": stopped") {
					t.Errorf("want a clean stop logged:\n%s", p.Output())
				}
				// A server process ends a moment after its client says goodbye, hence the wait.
				waitFor(t, "the process's database connections to close", func() bool {
					return b.Count(t, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'process_under_test'`) == 0
				})
			})
		})
	}
}

// abandonRequest leaves a ride request of rider unlocked at ride_created after a Stripe 500,
// aged past the completer's default thresholds, and returns its key.
func abandonRequest(t *testing.T, b *ridetest.Bundle, rider *ridetest.Rider, key string) string {
	t.Helper()
	b.Stripe.InjectChargeFaults(fakestripe.FaultError500, 1)
	if _, err := createRide(b, rider, key); err == nil {
		t.Fatal("want the request to fail on Stripe's 500")
	}
	b.Exec(t, `UPDATE idempotency_keys SET created_at = now() - interval '10 minutes',
		last_run_at = now() - interval '2 minutes' WHERE idempotency_key = $1`, key)
	return key
}

// finishRequest books a ride for b's rider under key.
func finishRequest(t *testing.T, b *ridetest.Bundle, key string) {
	t.Helper()
	if _, err := createRide(b, b.Rider, key); err != nil {
		t.Fatal(err)
	}
}

func createRide(b *ridetest.Bundle, rider *ridetest.Rider, key string) (*phases.Outcome, error) {
	executor := phases.New(b.Pool, b.StripeClient, slog.New(slog.DiscardHandler), phases.Config{})
	return executor.CreateRide(context.Background(), &phases.CreateRideRequest{
		KeyedRequest: phases.KeyedRequest{
			User:           rider.User,
			IdempotencyKey: key,
			OriginIP:       netip.MustParseAddr("203.0.113.7"),
		},
		Params: phases.RideParams{OriginLat: 1, OriginLon: 2, TargetLat: 3, TargetLon: 4},
	})
}

// insertChargedRide inserts a ride of b's rider that was charged, with no receipt yet, and
// returns its id.
func insertChargedRide(t *testing.T, b *ridetest.Bundle) int64 {
	t.Helper()
	var id int64
	if err := b.Pool.QueryRow(t.Context(), `
		INSERT INTO rides (origin_lat, origin_lon, target_lat, target_lon, stripe_charge_id, user_id)
		VALUES (0, 0, 1, 1, $1, $2) RETURNING id`, fmt.Sprintf("ch_%s", t.Name()), b.Rider.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
