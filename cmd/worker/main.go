// Command worker works River jobs: it mails ride receipts.
//
//	worker         work jobs until SIGINT or SIGTERM
//	worker -once   work the jobs available now, print one JSON line of counts, and exit
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/rocketrides/rocketrides/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/workers"
)

// Shutdown, within the 10 s (bootstrap.ShutdownTimeout) a process manager usually grants between
// SIGTERM and SIGKILL: running jobs get softStopTimeout to finish; then their contexts are
// cancelled, which puts each job back as available without using up an attempt, and they get
// hardStopTimeout to return. A receipt whose message is at the mail server already ignores the
// cancellation, since mailing it again would send a second copy: it waits for the server's
// verdict and records it. Should the verdict not come within hardStopTimeout, the worker exits
// with an error and leaves that job running, for River to rescue an hour later (see
// workers.SendRideReceiptWorker).
const (
	softStopTimeout = bootstrap.ShutdownTimeout * 7 / 10
	hardStopTimeout = bootstrap.ShutdownTimeout - softStopTimeout
)

// failedJobRetentionPeriod keeps discarded and cancelled jobs until a person deals with them. A
// discarded receipt job is a receipt its rider is owed and never got, and so is one the worker
// cancelled because no mail server takes the rider's address; River's job cleaner would delete them
// after a day or a week (its defaults), leaving no trace of them. -1 is River's "never". Only a client that
// works jobs runs the cleaner: the enqueuer's and admin's insert-only clients need no such
// setting. `admin list-failed-jobs` lists the discarded jobs, and `admin retry-job` puts one
// back to work.
const failedJobRetentionPeriod time.Duration = -1

// fetchCooldown is the shortest time between two fetches of jobs, River's FetchCooldown.
// River's default, 100 ms, held a receipt whose notification came less than 100 ms after the
// worker's last fetch for the rest of those 100 ms, and it capped the worker at one fetch of at
// most WORKER_CONCURRENCY jobs per 100 ms: rides booked back to back queued behind it, their
// receipts 150 to 300 ms after the 201 (issue 13). At 25 ms a receipt waits 25 ms at most for
// this, and a worker sends at most 40 fetches a second, and only while notifications come that
// fast; idle, it fetches once per WORKER_POLL_INTERVAL, as before.
const fetchCooldown = 25 * time.Millisecond

func main() {
	bootstrap.Main("worker", run)
}

func run(ctx context.Context) (err error) {
	once := flag.Bool("once", false, `work the jobs available now, then print {"completed":N,"failed":N,"discarded":N,"cancelled":N} and exit`)
	flag.Parse()

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	if cfg.WorkerPollInterval < fetchCooldown {
		return fmt.Errorf("WORKER_POLL_INTERVAL must be at least %s, the worker's shortest time between fetches, not %s", fetchCooldown, cfg.WorkerPollInterval)
	}
	logger, checkedPool, err := bootstrap.Open(ctx, cfg, bootstrap.LogOutput(*once))
	if err != nil {
		return err
	}
	if err := bootstrap.CheckRiverSchema(ctx, checkedPool); err != nil {
		checkedPool.Close()
		return err
	}
	pool, err := withMaxConns(ctx, checkedPool, poolMaxConns(cfg.WorkerConcurrency))
	if err != nil {
		checkedPool.Close()
		return err
	}
	defer func() {
		// Close waits for every connection to come back, and a job left running holds one
		// until its send ends, up to half a minute later. Exiting at once is what the process
		// manager's SIGKILL would make of it anyway; Postgres rolls back whatever transaction
		// the dropped connection had open.
		if !errors.Is(err, errJobsLeftRunning) {
			pool.Close()
		}
	}()

	m, err := mailer.New(cfg.SMTPURL, logger)
	if err != nil {
		return err
	}
	reg := bootstrap.NewRegistry(pool)
	workerMetrics := metrics.NewWorker(reg)
	metrics.RegisterRiverJobs(reg, workers.RiverJobsByState(pool))
	riverWorkers := river.NewWorkers()
	if err := workers.Register(riverWorkers, workers.Deps{Pool: pool, Mailer: m, MailFrom: cfg.MailFrom, Logger: logger, Metrics: workerMetrics}); err != nil {
		return err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		CancelledJobRetentionPeriod: failedJobRetentionPeriod,
		DiscardedJobRetentionPeriod: failedJobRetentionPeriod,
		FetchCooldown:               fetchCooldown,
		FetchPollInterval:           cfg.WorkerPollInterval,
		Logger:                      logger,
		Queues:                      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.WorkerConcurrency}},
		Workers:                     riverWorkers,
	})
	if err != nil {
		return fmt.Errorf("error creating River client: %w", err)
	}

	logger.InfoContext(ctx, "Worker: starting", slog.String("mailer", fmt.Sprint(m)),
		slog.Int("concurrency", cfg.WorkerConcurrency), slog.Int("pool_max_conns", int(pool.Config().MaxConns)),
		slog.Bool("once", *once))
	if *once {
		return runOnce(ctx, client, logger, os.Stdout)
	}

	if err := bootstrap.ServeMetrics(ctx, cfg, logger, reg); err != nil {
		return err
	}
	stopCounting := workers.CountFailures(client, workerMetrics)
	defer stopCounting()
	// Start gets a context that signals do not cancel: cancelling it would be River's hard stop,
	// and stop below stops gently first.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("error starting River: %w", err)
	}
	<-ctx.Done()
	logger.Info("Worker: stopping, letting running jobs finish")
	return stop(client, logger)
}

// stop stops River: gently, then, if jobs are still running after softStopTimeout, by
// cancelling them.
func stop(client *river.Client[pgx.Tx], logger *slog.Logger) error {
	softCtx, cancel := context.WithTimeout(context.Background(), softStopTimeout)
	defer cancel()
	err := client.Stop(softCtx)
	if err == nil {
		return nil
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("error stopping River: %w", err)
	}

	logger.Warn("Worker: jobs still running, cancelling them; they will run again",
		slog.Duration("waited", softStopTimeout))
	hardCtx, cancel := context.WithTimeout(context.Background(), hardStopTimeout)
	defer cancel()
	if err := client.StopAndCancel(hardCtx); err != nil {
		return fmt.Errorf("error stopping River: %w: %w", errJobsLeftRunning, err)
	}
	return nil
}

// errJobsLeftRunning says that jobs did not return within the hard stop: they stay running in
// River's table until River rescues them, and the process should exit without waiting for them.
var errJobsLeftRunning = errors.New("jobs did not return after being cancelled, and stay running until River rescues them")
