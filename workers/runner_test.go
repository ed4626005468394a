package workers

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/models"
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

	b.runRunner(t)

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

// A Runner started while the database takes no connections (a restart, a failover) starts River
// once it takes them again, and mails the receipt waiting for it, rather than exit; and gives up,
// saying why, after StartTimeout.
func TestRunnerStartsOnceTheDatabaseIsBack(t *testing.T) {
	t.Parallel()
	b := &testBundle{pool: dbtest.NewPool(t), smtp: smtptest.NewServer(t, smtptest.Options{})}
	ride := b.newRide(t, b.newRider(t), "ch_waiting")
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(t.Context(), receiptArgs(ride), nil); err != nil {
		t.Fatal(err)
	}

	// newRunner returns a Runner whose pool is refused every connection until up is set.
	newRunner := func(t *testing.T, startTimeout time.Duration) (*Runner, *atomic.Bool) {
		config := b.pool.Config().Copy()
		config.MinConns = 0
		var up atomic.Bool
		dialer := &net.Dialer{}
		config.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !up.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			return dialer.DialContext(ctx, network, addr)
		}
		pool, err := pgxpool.NewWithConfig(t.Context(), config)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		m, err := mailer.NewSMTP(b.smtp.URL())
		if err != nil {
			t.Fatal(err)
		}
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		runner, err := NewRunner(Deps{Pool: pool, Mailer: m, MailFrom: testMailFrom, Logger: logger},
			RunnerConfig{StopTimeout: 5 * time.Second, StartTimeout: startTimeout, PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return runner, &up
	}

	t.Run("GivesUpAfterStartTimeout", func(t *testing.T) {
		runner, _ := newRunner(t, 500*time.Millisecond)
		err := runner.Run(t.Context())
		if err == nil || !strings.Contains(err.Error(), "error starting River") || !models.IsUnavailable(err) {
			t.Fatalf("want the start to fail on the database being away, got %v", err)
		}
	})

	t.Run("StartsOnceTheDatabaseIsBack", func(t *testing.T) {
		runner, up := newRunner(t, time.Minute)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- runner.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("error running the runner: %v", err)
			}
		}()
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the runner gave up while the database was away: %v", err)
		case <-time.After(time.Second):
		}
		up.Store(true)
		deadline := time.Now().Add(30 * time.Second)
		for b.receipt(t, ride) == nil {
			if time.Now().After(deadline) {
				t.Fatal("no receipt mailed within 30 s of the database coming back")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
