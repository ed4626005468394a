package bootstrap

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rocketrides/rocketrides/internal/metrics"
)

// NewRegistry returns the process's metrics registry, holding the Go runtime's and the
// process's series and those of pool. The process registers its own series with it before it
// starts work, and serves it with ServeMetrics.
func NewRegistry(pool *pgxpool.Pool) *prometheus.Registry {
	reg := metrics.NewRegistry()
	metrics.RegisterPool(reg, pool)
	return reg
}

// ServeMetrics serves reg at GET /metrics on METRICS_ADDR, if set, until ctx ends. An address
// that cannot be listened on fails the start: a process whose metrics are missing looks dead to
// its alerts. One-off runs (-once) do not call it: they have nothing to be scraped for, and
// must not take the port of the process that runs for good.
func ServeMetrics(ctx context.Context, cfg *Config, logger *slog.Logger, reg *prometheus.Registry) error {
	if cfg.MetricsAddr == "" {
		return nil
	}
	listener, err := Listen("METRICS_ADDR", cfg.MetricsAddr)
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "Metrics: serving", slog.String("url", "http://"+listener.Addr().String()+"/metrics"))
	go func() {
		if err := ServeHTTP(ctx, listener, metrics.Handler(reg, logger), nil, logger, nil); err != nil {
			logger.ErrorContext(ctx, "Metrics: server failed", slog.String("error", err.Error()))
		}
	}()
	return nil
}
