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
	p, err := bootstrap.OpenProcess(ctx, "completer", args, `make one pass, print {"succeeded": N, "failed": M} and exit`)
	if err != nil {
		return err
	}
	defer p.Close()

	executor, err := bootstrap.NewExecutor(p.Config, p.Pool, p.Logger, p.Registry)
	if err != nil {
		return err
	}
	c := completer.New(p.Pool, executor, p.Logger, completer.Config{
		MinAge:    p.Config.CompleterMinAge,
		ReapAfter: p.Config.ReapAfter,
		IdleFor:   p.Config.CompleterIdleFor,
		Interval:  p.Config.CompleterInterval,
		Metrics:   metrics.NewCompleter(p.Registry),
	})
	metrics.RegisterRequestsAwaitingReview(p.Registry, c.RequestsAwaitingReview)

	return bootstrap.RunService(ctx, "Completer", p.Once, c, p.Config, p.Registry, os.Stdout, p.Logger)
}
