package main

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/phases"
)

// TestMetrics runs the worker with METRICS_ADDR and scrapes what became of its receipts, and
// River's jobs by state.
func TestMetrics(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	// Without SMTP_URL the receipt goes to the log, and counts as logged, not sent. A job for a
	// ride that does not exist is cancelled.
	t.Run("LoggedAndCancelled", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		w.insertJob(t, jobargs.SendRideReceipt{RideID: w.ride.ID + 1000, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency})

		p := proctest.Start(t, bin, []string{"DATABASE_URL=" + w.url, "METRICS_ADDR=127.0.0.1:0"})
		proctest.WaitMetrics(t, p, proctest.MetricsURL(t, p), map[string]float64{
			`rocketrides_receipts_total{result="logged"}`:    1,
			`rocketrides_receipts_total{result="sent"}`:      0,
			`rocketrides_receipts_total{result="cancelled"}`: 1,
			`rocketrides_river_jobs{state="cancelled"}`:      1,
			`rocketrides_river_jobs{state="available"}`:      0,
			`rocketrides_river_jobs{state="running"}`:        0,
		}, 30*time.Second)
	})

	// The mail server refuses the first receipt for good, on its last attempt: discarded, and it
	// stays in River for a person. A new job for the ride meets a passing refusal, then is sent
	// on its retry.
	t.Run("SentFailedAndDiscarded", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		if _, err := w.pool.Exec(t.Context(), `UPDATE river_job SET max_attempts = 1 WHERE id = $1`, w.jobID); err != nil {
			t.Fatal(err)
		}
		server := smtptest.NewServer(t, smtptest.Options{})
		server.FailNext(1, "554 5.7.1 Rejected")

		p := proctest.Start(t, bin, []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + server.URL(), "METRICS_ADDR=127.0.0.1:0"})
		url := proctest.MetricsURL(t, p)
		proctest.WaitMetrics(t, p, url, map[string]float64{
			`rocketrides_receipts_total{result="discarded"}`: 1,
			`rocketrides_river_jobs{state="discarded"}`:      1,
		}, 30*time.Second)

		server.FailNext(1, "451 4.3.0 Try again later")
		w.insertJob(t, jobargs.SendRideReceipt{RideID: w.ride.ID, UserID: w.rider.ID, Amount: phases.RideAmountCents, Currency: phases.RideCurrency})
		proctest.WaitMetrics(t, p, url, map[string]float64{
			`rocketrides_receipts_total{result="sent"}`:      1,
			`rocketrides_receipts_total{result="failed"}`:    1,
			`rocketrides_receipts_total{result="discarded"}`: 1,
			`rocketrides_receipts_total{result="logged"}`:    0,
			`rocketrides_river_jobs{state="discarded"}`:      1,
			`rocketrides_river_jobs{state="retryable"}`:      0,
			`rocketrides_river_jobs{state="available"}`:      0,
		}, 30*time.Second)
		if n := len(server.Messages()); n != 1 {
			t.Errorf("want 1 receipt mailed, got %d", n)
		}
	})
}

// insertJob inserts a receipt job with args, as the enqueuer would.
func (w *testBundle) insertJob(t *testing.T, args jobargs.SendRideReceipt) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(w.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Insert(t.Context(), args, nil); err != nil {
		t.Fatal(err)
	}
}
