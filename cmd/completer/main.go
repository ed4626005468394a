// Command completer finishes ride requests that their clients abandoned, by running them through
// the same phases as the API. With -once it makes one pass, prints {"succeeded":N,"failed":M}
// and exits; otherwise it makes passes until SIGINT or SIGTERM.
package main

import (
	"context"
	"os"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/completer"
	"github.com/rocketrides/rocketrides/internal/metrics"
)

func main() {
	cli.Main("completer", func(ctx context.Context) error {
		return run(ctx, os.Args[1:])
	})
}

func run(ctx context.Context, args []string) error {
	once, err := bootstrap.ParseOnceFlag("completer", args, `make one pass, print {"succeeded": N, "failed": M} and exit`)
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
	executor, err := bootstrap.NewExecutor(cfg, pool, logger, reg)
	if err != nil {
		return err
	}
	c := completer.New(pool, executor, logger, completer.Config{
		MinAge:    cfg.CompleterMinAge,
		ReapAfter: cfg.ReapAfter,
		IdleFor:   cfg.CompleterIdleFor,
		Interval:  cfg.CompleterInterval,
		Metrics:   metrics.NewCompleter(reg),
	})
	metrics.RegisterRequestsAwaitingReview(reg, c.RequestsAwaitingReview)

	return bootstrap.RunService(ctx, "Completer", once, c, cfg, reg, os.Stdout, logger)
}
