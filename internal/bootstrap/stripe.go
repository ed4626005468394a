package bootstrap

import (
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/faults"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/phases"
)

// NewStripe returns the Stripe client the configuration describes.
func NewStripe(cfg *Config) (*client.API, error) {
	if cfg.StripeAPIKey == "" {
		return nil, errors.New("STRIPE_API_KEY is not set")
	}
	return stripeclient.New(stripeclient.Config{
		APIKey:  cfg.StripeAPIKey,
		URL:     cfg.StripeAPIURL,
		Timeout: cfg.StripeTimeout,
	}), nil
}

// NewExecutor returns the phase executor the configuration describes, for the processes that
// drive ride requests (the API and the completer).
func NewExecutor(cfg *Config, pool *pgxpool.Pool, logger *slog.Logger) (*phases.Executor, error) {
	sc, err := NewStripe(cfg)
	if err != nil {
		return nil, err
	}
	config := phases.Config{LockLease: cfg.LockLease, SimulateErrors: cfg.SimulateErrors}
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
