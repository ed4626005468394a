package workers

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
)

func TestPoolMaxConns(t *testing.T) {
	t.Parallel()
	if got := PoolMaxConns(10); got < 10+2 {
		t.Fatalf("want room for 10 jobs and River, got %d", got)
	}
}

// A receipt job that a lost connection left running is taken up again by a Runner's rescuer once
// its attempt cannot be running any more, and not before: the job left at the longest attempt
// that may still be under way is not touched, so that its receipt is not mailed twice.
func TestRunnerRescuesJobsLeftRunning(t *testing.T) {
	t.Parallel()
	if RescueStuckJobsAfter <= JobTimeout+mailer.SendTimeout+RecordTimeout {
		t.Fatalf("want RescueStuckJobsAfter (%s) past the longest attempt, JobTimeout, SendTimeout and RecordTimeout", RescueStuckJobsAfter)
	}
	b := &testBundle{pool: dbtest.NewPool(t), smtp: smtptest.NewServer(t, smtptest.Options{})}
	rider := b.newRider(t)
	stuck := b.newRide(t, rider, "ch_stuck")
	inFlight := b.newRide(t, rider, "ch_in_flight")

	// Both jobs as a worker that lost its connection mid-attempt leaves them: running, attempt 1.
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	leaveRunning := func(args river.JobArgs, since time.Duration) int64 {
		res, err := inserter.Insert(t.Context(), args, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.pool.Exec(t.Context(), `
			UPDATE river_job SET state = 'running', attempt = 1, attempted_by = ARRAY['gone'],
			       attempted_at = now() - make_interval(secs => $2)
			WHERE id = $1`, res.Job.ID, since.Seconds())
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	stuckID := leaveRunning(receiptArgs(stuck), RescueStuckJobsAfter+time.Second)
	// Still within JobTimeout and SendTimeout: its send may be under way, its record to come.
	inFlightID := leaveRunning(receiptArgs(inFlight), JobTimeout+mailer.SendTimeout)

	m, err := mailer.NewSMTP(b.smtp.URL())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	runner, err := NewRunner(Deps{Pool: b.pool, Mailer: m, MailFrom: testMailFrom, Logger: logger},
		RunnerConfig{StopTimeout: 10 * time.Second, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("error running the runner: %v", err)
		}
	}()

	// The rescuer runs as soon as the runner is elected leader, and the retry comes a second
	// later; the scheduler makes it available within 5 s.
	deadline := time.Now().Add(30 * time.Second)
	for b.receipt(t, stuck) == nil {
		if time.Now().After(deadline) {
			var state string
			_ = b.pool.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, stuckID).Scan(&state)
			t.Fatalf("want the receipt of the job left running for %s mailed, its job is %s after 30 s", RescueStuckJobsAfter, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(b.smtp.Messages()); n != 1 {
		t.Errorf("want 1 receipt mailed, got %d", n)
	}
	var state string
	if err := b.pool.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, inFlightID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "running" || b.receipt(t, inFlight) != nil {
		t.Errorf("want the job whose attempt may still be under way left running and its receipt not mailed, got %s", state)
	}
}
