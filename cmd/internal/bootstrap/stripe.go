package bootstrap

import (
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/cmd/internal/faults"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/phases"
)

// NewStripe returns the Stripe client the configuration describes, whose calls are counted in
// reg's rocketrides_stripe_* series (reg nil: not counted).
func NewStripe(cfg *Config, reg prometheus.Registerer) (*client.API, error) {
	if cfg.StripeAPIKey == "" {
		return nil, errors.New("STRIPE_API_KEY is not set")
	}
	return stripeclient.New(stripeclient.Config{
		APIKey:  cfg.StripeAPIKey,
		URL:     cfg.StripeAPIURL,
		Timeout: cfg.StripeTimeout,
		// Every request the API works on may be charging at once.
		MaxIdleConnsPerHost: cfg.RateLimits.WithDefaults().MaxRequestsInFlight,
		Metrics:             metrics.NewStripe(reg),
	}), nil
}

// executorConfig is the phase executor's configuration that cfg sets; checkRules checks it.
func (cfg *Config) executorConfig() phases.Config {
	return phases.Config{LockLease: cfg.LockLease, SimulateErrors: cfg.SimulateErrors}
}

// NewExecutor returns the phase executor the configuration describes, for the processes that
// drive ride requests (the API and the completer), with its series and its Stripe client's in
// reg.
func NewExecutor(cfg *Config, pool *pgxpool.Pool, logger *slog.Logger, reg prometheus.Registerer) (*phases.Executor, error) {
	sc, err := NewStripe(cfg, reg)
	if err != nil {
		return nil, err
	}
	config := cfg.executorConfig()
	config.Metrics = phases.NewMetrics(reg)
	injector, err := faults.Parse(cfg.Faults, logger)
	if err != nil {
		return nil, err
	}
	if injector != nil {
		logger.Warn("Bootstrap: fault injection is armed (FAULTS); never in production", slog.String("faults", cfg.Faults))
		config.Faults = injector
	}
	return phases.New(pool, sc, logger, config), nil
}
