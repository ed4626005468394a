package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rocketrides/rocketrides/internal/testing/proctest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
)

// TestLogsReceiptsWithoutSMTP runs the worker the way the Procfile does, without SMTP_URL: the
// receipt appears in its log, rendered, and is called logged, not sent; the job completes, and
// SIGTERM leaves nothing running.
func TestLogsReceiptsWithoutSMTP(t *testing.T) {
	t.Parallel()
	w := setup(t)
	worker := proctest.Start(t, proctest.Build(t, "worker"), []string{"DATABASE_URL=" + w.url, "LOG_FORMAT=json"})

	line := proctest.WaitOutput(t, worker, "Worker: logged receipt", 15*time.Second)
	if !strings.Contains(line, `"ride_id":`) {
		t.Errorf("want the ride in the log line, got %s", line)
	}
	if strings.Contains(worker.Output(), "Worker: sent receipt") {
		t.Errorf("want a receipt that only went to the log not called sent:\n%s", worker.Output())
	}
	logged := proctest.WaitOutput(t, worker, "Mailer: logged message", time.Second)
	if !strings.Contains(logged, "$20.00") || !strings.Contains(logged, "rider@example.com") {
		t.Errorf("want the rendered receipt in the log, got %s", logged)
	}

	worker.Terminate(t, 10*time.Second)
	if state := w.jobState(t); state != "completed" {
		t.Fatalf("want the job completed, got %s", state)
	}
	var running int
	if err := w.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Fatalf("want no job left running after a clean stop, got %d", running)
	}
}

// TestSIGTERMWhileSending stops the worker while a receipt is on its way to the mail server.
// The worker's hard stop comes 7 s after SIGTERM (the Runner's soft stop); the process manager's
// SIGKILL would come 10 s after. A job that ends within the grace period is finished. One stuck
// before its message is handed over is released for another worker. One whose message the server
// has must not be released: another worker would mail it again.
//
// The mail server holds the message until the test releases it (smtptest.HoldNext), so that each
// case orders its events (message at the server, SIGTERM, hard stop, the server's answer) by
// waiting for them rather than by a clock a loaded machine can outrun.
func TestSIGTERMWhileSending(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "worker")

	// start starts a worker mailing through smtpURL, and returns once the job is running.
	start := func(t *testing.T, w *testBundle, smtpURL string) *proctest.Process {
		worker := proctest.Start(t, bin, []string{"DATABASE_URL=" + w.url, "SMTP_URL=" + smtpURL})
		deadline := time.Now().Add(10 * time.Second)
		for w.jobState(t) != "running" {
			if time.Now().After(deadline) {
				t.Fatalf("job not running after 10s:\n%s", worker.Output())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return worker
	}
	// holding starts a mail server that holds the receipt, and a worker mailing through it, and
	// sends the worker SIGTERM once the server has the whole message.
	holding := func(t *testing.T, w *testBundle) (*smtptest.Server, *smtptest.Hold, *proctest.Process) {
		server := smtptest.NewServer(t, smtptest.Options{})
		hold := server.HoldNext()
		worker := start(t, w, server.URL())
		select {
		case <-hold.Arrived():
		case <-time.After(10 * time.Second):
			t.Fatalf("the receipt did not reach the mail server within 10s:\n%s", worker.Output())
		}
		sigterm(t, worker)
		return server, hold, worker
	}
	jobRow := func(t *testing.T, w *testBundle) (state string, attempt, numErrors int) {
		t.Helper()
		if err := w.pool.QueryRow(t.Context(), `SELECT state, attempt, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, w.jobID).
			Scan(&state, &attempt, &numErrors); err != nil {
			t.Fatal(err)
		}
		return state, attempt, numErrors
	}
	const cancelling = "Worker: jobs still running, cancelling them"

	// The server answers as soon as the worker has begun to stop: 7 s before the hard stop.
	t.Run("FinishesAJobThatEndsInTime", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		server, hold, worker := holding(t, w)
		proctest.WaitOutput(t, worker, "Worker: stopping", 10*time.Second)
		hold.Release()
		if code := worker.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("want exit 0, got %d:\n%s", code, worker.Output())
		}
		if strings.Contains(worker.Output(), cancelling) {
			t.Fatalf("want the job finished within the soft stop, not cancelled:\n%s", worker.Output())
		}
		if state := w.jobState(t); state != "completed" || len(server.Messages()) != 1 {
			t.Fatalf("want the job completed and the receipt mailed, got %s and %d messages", state, len(server.Messages()))
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
	})

	t.Run("ReleasesAJobStuckBeforeItsMessageIsHandedOver", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		worker := start(t, w, "smtp://"+silentServer(t))
		sigterm(t, worker)
		if code := worker.Wait(t, 11*time.Second); code != 0 {
			t.Fatalf("want exit 0 within the grace period, got %d:\n%s", code, worker.Output())
		}
		if state, attempt, numErrors := jobRow(t, w); state != "available" || attempt != 0 || numErrors != 0 {
			t.Fatalf("want the job released as available with no attempt used up, got %s, attempt %d, %d errors", state, attempt, numErrors)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err == nil {
			t.Fatal("want no receipt recorded for a send that was cut short")
		}
		if !strings.Contains(worker.Output(), cancelling) {
			t.Errorf("want the cancellation logged:\n%s", worker.Output())
		}
	})

	// The server answers once the hard stop has cancelled the job, within the grace period.
	t.Run("FinishesAJobWhoseMessageIsAtTheServer", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		server, hold, worker := holding(t, w)
		proctest.WaitOutput(t, worker, cancelling, 15*time.Second)
		hold.Release()
		if code := worker.Wait(t, 10*time.Second); code != 0 {
			t.Fatalf("want exit 0 within the grace period, got %d:\n%s", code, worker.Output())
		}
		if state, attempt, _ := jobRow(t, w); state != "completed" || attempt != 1 {
			t.Fatalf("want the job completed, not released to mail the receipt again; got %s at attempt %d", state, attempt)
		}
		if n := len(server.Messages()); n != 1 {
			t.Fatalf("want 1 receipt mailed, got %d", n)
		}
		if _, err := models.RideReceiptGet(t.Context(), w.pool, w.ride.ID); err != nil {
			t.Fatalf("want the receipt recorded: %v", err)
		}
	})

	// The server has not answered when the grace period ends. Whether it will deliver is not
	// known; releasing the job would mail the receipt again at once, so it is left running for
	// River to rescue after workers.RescueStuckJobsAfter.
	t.Run("LeavesAJobWhoseMessageIsAtTheServerRunning", func(t *testing.T) {
		t.Parallel()
		w := setup(t)
		_, _, worker := holding(t, w) // never released
		if code := worker.Wait(t, 15*time.Second); code == 0 {
			t.Fatalf("want a non-zero exit for a stop that left a job running:\n%s", worker.Output())
		}
		if state, attempt, _ := jobRow(t, w); state != "running" || attempt != 1 {
			t.Fatalf("want the job left running, not released to mail the receipt again; got %s at attempt %d", state, attempt)
		}
		if !strings.Contains(worker.Output(), "did not return after being cancelled") {
			t.Errorf("want the job left running reported:\n%s", worker.Output())
		}
	})
}
