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
	p, err := bootstrap.OpenProcess(ctx, "reaper", args, `make one pass, print {"reaped": N, "abandoned": M} and exit`)
	if err != nil {
		return err
	}
	defer p.Close()

	r := reaper.New(p.Pool, p.Logger, reaper.Config{
		ReapAfter: p.Config.ReapAfter,
		Interval:  p.Config.ReaperInterval,
		Metrics:   metrics.NewReaper(p.Registry),
	})
	return bootstrap.RunService(ctx, "Reaper", p.Once, r, p.Config, p.Registry, os.Stdout, p.Logger)
}
