// Command enqueuer moves committed staged jobs into River, waking as soon as a job is staged.
// Several may run at once. With -once it moves one batch, prints {"enqueued": N, "failed": M}
// and exits, for tests, cron and operators.
package main

import (
	"context"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/models"
)

func main() {
	cli.Main("enqueuer", func(ctx context.Context) error {
		return run(ctx, os.Args[1:])
	})
}

func run(ctx context.Context, args []string) error {
	once, err := bootstrap.ParseOnceFlag("enqueuer", args, `move one batch of staged jobs, print {"enqueued": N, "failed": M} and exit`)
	if err != nil {
		return err
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	stopTracing, err := bootstrap.Trace(ctx, "enqueuer")
	if err != nil {
		return err
	}
	defer stopTracing()
	logger, pool, err := bootstrap.Open(ctx, cfg, bootstrap.LogOutput(once))
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := bootstrap.CheckRiverSchema(ctx, pool); err != nil {
		return err
	}

	riverClient, err := enqueuer.NewRiverClient(pool, logger)
	if err != nil {
		return err
	}
	reg := bootstrap.NewRegistry(pool)
	enq, err := enqueuer.New(pool, riverClient, jobargs.DecodeStagedJob, logger, enqueuer.Config{
		PollInterval: cfg.EnqueuerPollInterval,
		JobNames:     jobargs.StagedJobNames(),
		Metrics:      metrics.NewEnqueuer(reg),
	})
	if err != nil {
		return err
	}
	metrics.RegisterStagedJobs(reg, func(ctx context.Context) (*metrics.StagedJobs, error) {
		b, err := models.StagedJobCountBacklog(ctx, pool) // any enqueuer reports the whole backlog
		if err != nil {
			return nil, err
		}
		return &metrics.StagedJobs{Pending: b.Pending, Failed: b.Failed, OldestPendingAge: b.OldestPendingAge}, nil
	})

	return bootstrap.RunService(ctx, "Enqueuer", once, enq, cfg, reg, os.Stdout, logger)
}
