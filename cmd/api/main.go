// Command api serves the Rocket Rides HTTP API.
package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/telemetry"
)

func main() {
	cli.Main("api", run)
}

// gcPercentDefault is the API's garbage collection target unless GOGC sets one: a collection
// when the heap has grown by four times what is live, where Go's default waits for it to double.
// A booking allocates tens of kilobytes and keeps none of it, while the live heap stays small
// (about 6 MB at 32 clients), so at Go's default the collector ran about ten times a second
// under load. At 400 it runs a quarter as often, and the heap peaks about 4 x 6 = 24 MB above
// what is live instead of 6 MB: docs/performance.md has the measurement.
const gcPercentDefault = 400

func run(ctx context.Context) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentDefault)
	}
	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	tokenKey, err := cfg.TokenKey()
	if err != nil {
		return err
	}
	stopTracing, err := bootstrap.Trace(ctx, "api")
	if err != nil {
		return err
	}
	defer stopTracing()
	logger, pool, err := bootstrap.Open(ctx, cfg, os.Stdout)
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := bootstrap.NewRegistry(pool)
	executor, err := bootstrap.NewExecutor(cfg, pool, logger, reg)
	if err != nil {
		return err
	}
	if err := bootstrap.ServeMetrics(ctx, cfg, logger, reg); err != nil {
		return err
	}

	listener, err := bootstrap.Listen("PORT", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "API: listening", slog.String("addr", listener.Addr().String()),
		slog.Bool("simulate_errors", cfg.SimulateErrors))

	apiMetrics := metrics.NewAPI(reg)
	guard := cfg.ConnGuard(apiMetrics.ShedConnection)
	metrics.RegisterOpenConnections(reg, guard.Open)
	if cfg.StripeWebhookSecret == "" {
		logger.WarnContext(ctx, "API: STRIPE_WEBHOOK_SECRET is not set, so POST /webhooks/stripe is off: refunds and disputes made at Stripe will not reach rides")
	}
	server := api.NewServer(pool, executor, logger, api.Config{Limits: cfg.RateLimits, Metrics: apiMetrics, TokenKey: tokenKey,
		TrustedProxies: cfg.TrustedProxies, StripeWebhookSecret: cfg.StripeWebhookSecret})
	if err := bootstrap.ServeHTTP(ctx, listener, telemetry.Handler(server.Handler(), "api"), guard, logger, server.AbortInFlight); err != nil {
		return err
	}
	logger.InfoContext(context.WithoutCancel(ctx), "API: stopped") // as every process says once it stopped cleanly
	return nil
}
