// Command reaper deletes idempotency keys older than REAP_AFTER, recording the ones that never
// finished as abandoned requests first. With -once it makes one pass, prints
// {"reaped":N,"abandoned":M} and exits; otherwise it makes passes until SIGINT or SIGTERM.
package main

import (
	"context"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/reaper"
)

func main() {
	cli.Main("reaper", func(ctx context.Context) error {
		return run(ctx, os.Args[1:])
	})
}

func run(ctx context.Context, args []string) error {
	once, err := bootstrap.ParseOnceFlag("reaper", args, `make one pass, print {"reaped": N, "abandoned": M} and exit`)
	if err != nil {
		return err
	}

	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	logger, pool, err := bootstrap.Open(ctx, cfg, bootstrap.LogOutput(once))
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := bootstrap.NewRegistry(pool)
	r := reaper.New(pool, logger, reaper.Config{
		ReapAfter: cfg.ReapAfter,
		Interval:  cfg.ReaperInterval,
		Metrics:   metrics.NewReaper(reg),
	})

	return bootstrap.RunService(ctx, "Reaper", once, r, cfg, reg, os.Stdout, logger)
}
