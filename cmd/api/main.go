// Command api serves the Rocket Rides HTTP API.
package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/rocketrides/rocketrides/internal/cli"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/cmd/internal/bootstrap"
	"github.com/rocketrides/rocketrides/internal/metrics"
)

func main() {
	cli.Main("api", run)
}

func run(ctx context.Context) error {
	cfg, err := bootstrap.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	tokenKey, err := cfg.TokenKey()
	if err != nil {
		return err
	}
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
	if err := bootstrap.ServeHTTP(ctx, listener, server.Handler(), guard, logger, server.AbortInFlight); err != nil {
		return err
	}
	logger.InfoContext(context.WithoutCancel(ctx), "API: stopped") // as every process says once it stopped cleanly
	return nil
}
