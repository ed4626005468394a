package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// RunnerConfig tunes a Runner. The zero value of each field means its default, but for
// StopTimeout.
type RunnerConfig struct {
	// Concurrency is how many jobs run at once. Default ConcurrencyDefault.
	Concurrency int

	// PollInterval is how often River looks for jobs when no notification woke it: the
	// fallback for a missed NOTIFY, one query each time. At least FetchCooldown. Default
	// PollIntervalDefault.
	PollInterval time.Duration

	// StartTimeout is how long a start waits for a database that is away: one restarting, or
	// failing over. Default StartTimeoutDefault.
	StartTimeout time.Duration

	// StopTimeout is what a stop may take, soft and hard stop together: the time a process
	// manager grants between SIGTERM and SIGKILL (bootstrap.ShutdownTimeout). Required.
	StopTimeout time.Duration
}

// Defaults of RunnerConfig.
const (
	// ConcurrencyDefault is ten receipts in flight at once, each holding a database connection
	// while it mails (see PoolMaxConns).
	ConcurrencyDefault = 10

	// PollIntervalDefault bounds how late a job whose notification was missed starts, at one
	// query a second.
	PollIntervalDefault = time.Second

	// StartTimeoutDefault outlasts a failover of the development formation (seconds) many times.
	StartTimeoutDefault = time.Minute
)

// FetchCooldown is the shortest time between two fetches of jobs, River's FetchCooldown.
// River's default, 100 ms, holds a receipt whose notification comes less than 100 ms after the
// worker's last fetch for the rest of those 100 ms, and caps the worker at one fetch of at most
// Concurrency jobs per 100 ms, so that receipts of rides booked back to back would come 150 to
// 300 ms after the 201. At 25 ms a receipt waits 25 ms at most for this, and a worker sends at
// most 40 fetches a second, and only while notifications come that fast; idle, it fetches once
// per PollInterval.
const FetchCooldown = 25 * time.Millisecond

// failedJobRetentionPeriod keeps discarded and cancelled jobs until a person deals with them. A
// discarded receipt job is a receipt its rider is owed and never got, and so is one the worker
// cancelled because no mail server takes the rider's address; River's job cleaner would delete
// them after a day or a week (its defaults), leaving no trace of them. -1 is River's "never".
// Only a client that works jobs runs the cleaner: the enqueuer's and admin's insert-only
// clients need no such setting. `admin list-failed-jobs` lists the discarded jobs, and `admin
// retry-job` puts one back to work.
const failedJobRetentionPeriod time.Duration = -1

// JobTimeout bounds one attempt of a job: its context is cancelled after it. River's default,
// named here because RescueStuckJobsAfter is built on it.
const JobTimeout = time.Minute

// RescueStuckJobsAfter is how long a job may stay running before River's rescuer, which the
// elected leader among the workers runs every 30 s, takes it for stuck and retries it. A job is
// left running when its worker lost the database (a failover) before River could record the
// attempt's end, or died. The bound must outlast any attempt that is in fact still running, or a
// receipt would be mailed twice: an attempt runs for at most JobTimeout, then a send already
// under way finishes within mailer.SendTimeout and is recorded within RecordTimeout, both of which
// ignore the job's cancellation (see sendReceipt). The margin covers skew between the
// leader's clock and the database's, which sets attempted_at.
const RescueStuckJobsAfter = JobTimeout + mailer.SendTimeout + RecordTimeout + rescueMargin

// rescueMargin is RescueStuckJobsAfter's slack beyond the longest attempt: skew between the
// clocks, and the time a loaded worker takes between River's attempted_at and the attempt's
// start.
const rescueMargin = 20 * time.Second

// rescueInterval is how often River's rescuer looks for stuck jobs: River's own, which its
// Config does not let a client change.
const rescueInterval = 30 * time.Second

// ReceiptRescueBound is how long after its attempt began a receipt job left running by a lost
// connection or a dead worker is mailed: RescueStuckJobsAfter, the rescuer's interval, and half a
// minute for the rest, a leader elected again once the database is back, the retry's backoff
// (one second after a first attempt, 16 s after a second), River's scheduler (every 5 s) and the
// fetch. docs/receipts.md states it and the failover soak holds every receipt to it.
const ReceiptRescueBound = RescueStuckJobsAfter + rescueInterval + 30*time.Second

// riverConnsMax is how many pool connections River itself may hold besides those of running
// jobs: its listener keeps one for good, and fetching jobs, completing them, electing a leader
// and the leader's maintenance take one each, at most, at a time.
const riverConnsMax = 5

// PoolMaxConns is the database pool a Runner of concurrency jobs at once needs. Each receipt
// job holds a connection from before it sends to the commit that records the send (see
// SendRideReceiptWorker), so that recording never waits for one; a smaller pool would hold the
// jobs up, or River.
func PoolMaxConns(concurrency int) int32 {
	return int32(cmp.Or(concurrency, ConcurrencyDefault) + riverConnsMax)
}

// Runner is the River client of a worker process, working this package's jobs, and the way that
// process stops it.
type Runner struct {
	client *river.Client[pgx.Tx]
	config RunnerConfig
	deps   Deps
}

// NewRunner returns a Runner working every job of this package on deps.Pool, which should hold
// PoolMaxConns(config.Concurrency) connections.
func NewRunner(deps Deps, config RunnerConfig) (*Runner, error) {
	if config.StopTimeout <= 0 {
		return nil, errors.New("a runner needs a stop timeout")
	}
	config.Concurrency = cmp.Or(config.Concurrency, ConcurrencyDefault)
	config.PollInterval = cmp.Or(config.PollInterval, PollIntervalDefault)
	config.StartTimeout = cmp.Or(config.StartTimeout, StartTimeoutDefault)
	riverWorkers := river.NewWorkers()
	if err := Register(riverWorkers, deps); err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(deps.Pool), &river.Config{
		CancelledJobRetentionPeriod: failedJobRetentionPeriod,
		DiscardedJobRetentionPeriod: failedJobRetentionPeriod,
		FetchCooldown:               FetchCooldown,
		FetchPollInterval:           config.PollInterval,
		JobTimeout:                  JobTimeout,
		Logger:                      deps.Logger,
		Plugins:                     tracing.RiverPlugins(), // each job's work in its ride's trace when tracing
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: config.Concurrency}},
		RescueStuckJobsAfter:        RescueStuckJobsAfter,
		Workers:                     riverWorkers,
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	return &Runner{client: client, config: config, deps: deps}, nil
}

// Run works jobs until ctx ends, counting failed attempts in deps.Metrics, then stops (see
// stop).
func (r *Runner) Run(ctx context.Context) error {
	if r.deps.Metrics != nil {
		stopCounting := CountFailures(r.client, r.deps.Metrics)
		defer stopCounting()
	}
	if err := r.start(ctx); err != nil {
		return err
	}
	r.deps.Logger.InfoContext(ctx, "Worker: started", slog.Int("concurrency", r.config.Concurrency))
	<-ctx.Done()
	r.deps.Logger.Info("Worker: stopping, letting running jobs finish")
	if err := r.stop(); err != nil {
		return err
	}
	r.deps.Logger.Info("Worker: stopped") // as every process says once it stopped cleanly
	return nil
}

// start starts River, trying again while the database is away (models.IsUnavailable), for up
// to StartTimeout: a worker that a process manager restarts while Postgres restarts or fails
// over would otherwise exit at once, and leave its receipts to the other workers, or to none.
// River's Start gets a context that signals do not cancel: cancelling it would be River's hard
// stop, and stop stops gently first.
func (r *Runner) start(ctx context.Context) error {
	deadline := time.Now().Add(r.config.StartTimeout)
	for attempt := 1; ; attempt++ {
		err := r.client.Start(context.WithoutCancel(ctx))
		if err == nil {
			return nil
		}
		if !models.IsUnavailable(err) || time.Now().After(deadline) {
			return fmt.Errorf("error starting River: %w", err)
		}
		r.deps.Logger.WarnContext(ctx, "Worker: the database is away; starting River again shortly",
			slog.Int("attempt", attempt), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return fmt.Errorf("error starting River: %w", err)
		case <-time.After(min(time.Duration(attempt)*200*time.Millisecond, 2*time.Second)):
		}
	}
}

// ErrJobsLeftRunning says that jobs did not return within the hard stop: they stay running in
// River's table until River rescues them, and the process should exit without waiting for them
// (closing its pool would wait for the connections they hold).
var ErrJobsLeftRunning = errors.New("jobs did not return after being cancelled, and stay running until River rescues them")

// stop stops River within StopTimeout. Running jobs get seven tenths of it to finish; then their
// contexts are cancelled, which puts each job back as available without using up an attempt,
// and they get the rest to return. A receipt whose message is at the mail server already
// ignores the cancellation, since mailing it again would send a second copy: it waits for the
// server's verdict and records it. Should the verdict not come in time, stop returns
// ErrJobsLeftRunning and leaves that job running, for River to rescue after
// RescueStuckJobsAfter (see SendRideReceiptWorker).
func (r *Runner) stop() error {
	softStopTimeout := r.config.StopTimeout * 7 / 10
	softCtx, cancel := context.WithTimeout(context.Background(), softStopTimeout)
	defer cancel()
	err := r.client.Stop(softCtx)
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("error stopping River: %w", err)
	}

	r.deps.Logger.Warn("Worker: jobs still running, cancelling them; they will run again",
		slog.Duration("waited", softStopTimeout))
	hardCtx, cancel := context.WithTimeout(context.Background(), r.config.StopTimeout-softStopTimeout)
	defer cancel()
	if err := r.client.StopAndCancel(hardCtx); err != nil {
		return fmt.Errorf("error stopping River: %w: %w", ErrJobsLeftRunning, err)
	}
	return nil
}
