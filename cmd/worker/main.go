// Command worker works River jobs: it mails ride receipts.
//
//	worker         work jobs until SIGINT or SIGTERM
//	worker -once   work the jobs available now, print one JSON line of counts, and exit
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/workers"
)

func main() {
	cli.Main("worker", func(ctx context.Context) error {
		return run(ctx, os.Args[1:])
	})
}

func run(ctx context.Context, args []string) (err error) {
	once, err := bootstrap.ParseOnceFlag("worker", args, `work the jobs available now, then print {"completed":N,"failed":N,"discarded":N,"cancelled":N} and exit`)
	if err != nil {
		return err
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	cfg.PoolMaxConnsAtLeast = workers.PoolMaxConns(cfg.WorkerConcurrency)
	stopTracing, err := bootstrap.Trace(ctx, "worker")
	if err != nil {
		return err
	}
	defer stopTracing()
	logger, pool, err := bootstrap.Open(ctx, cfg, bootstrap.LogOutput(once))
	if err != nil {
		return err
	}
	if err := bootstrap.CheckRiverSchema(ctx, pool); err != nil {
		pool.Close()
		return err
	}
	defer func() {
		// Close would wait for the connections of jobs left running, up to half a minute; the
		// process manager's SIGKILL would not, and Postgres rolls their transactions back.
		if !errors.Is(err, workers.ErrJobsLeftRunning) {
			pool.Close()
		}
	}()

	m, err := mailer.New(cfg.SMTPURL, logger)
	if err != nil {
		return err
	}
	reg := bootstrap.NewRegistry(pool)
	metrics.RegisterRiverJobs(reg, workers.RiverJobsByState(pool))
	runner, err := workers.NewRunner(
		workers.Deps{Pool: pool, Mailer: m, MailFrom: cfg.MailFrom, Logger: logger, Metrics: metrics.NewWorker(reg)},
		workers.RunnerConfig{Concurrency: cfg.WorkerConcurrency, PollInterval: cfg.WorkerPollInterval, StopTimeout: bootstrap.ShutdownTimeout})
	if err != nil {
		return err
	}

	logger.InfoContext(ctx, "Worker: starting", slog.String("mailer", fmt.Sprint(m)),
		slog.Int("concurrency", cfg.WorkerConcurrency), slog.Int("pool_max_conns", int(pool.Config().MaxConns)),
		slog.Bool("once", once))
	if once {
		return runner.RunOnce(ctx, os.Stdout)
	}
	if err := bootstrap.ServeMetrics(ctx, cfg, logger, reg); err != nil {
		return err
	}
	return runner.Run(ctx)
}
