// Package bootstrap is what every Rocket Rides process does before its real work starts:
// read configuration from the environment, build a logger, open and check the database pool,
// build the Stripe client and the phase executor, and run until SIGINT or SIGTERM.
package bootstrap

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Config is every setting any process reads, parsed once from the environment. A process uses
// the fields it needs; each field says its variable and its default.
type Config struct {
	// DatabaseURL (DATABASE_URL, required) is the Postgres connection string.
	DatabaseURL string

	// LogFormat (LOG_FORMAT, default "text") is "text" or "json".
	LogFormat string

	// LogLevel (LOG_LEVEL, default "info") is debug, info, warn or error.
	LogLevel slog.Level

	// Port (PORT, default 5004) is the API's listening port.
	Port int

	// StripeAPIKey (STRIPE_API_KEY, required to charge) is the secret key charges are made with.
	StripeAPIKey string

	// StripeAPIURL (STRIPE_API_URL, default Stripe's own) is the base URL of the Stripe API.
	StripeAPIURL string

	// StripeTimeout (STRIPE_TIMEOUT, default 20s) bounds one call to Stripe. It must be under
	// a third of LockTimeout, so that a request stuck on Stripe gives up long before another
	// request may take over its key.
	StripeTimeout time.Duration

	// LockTimeout (IDEMPOTENCY_KEY_LOCK_TIMEOUT, default 90s) is how long a request may hold an
	// idempotency key before another request may take it over.
	LockTimeout time.Duration

	// SimulateErrors (SIMULATE_ERRORS, default false) allows the raise_error demo parameter.
	SimulateErrors bool
}

// LoadConfig reads the configuration through getenv (os.Getenv outside tests).
func LoadConfig(getenv func(string) string) (*Config, error) {
	cfg := &Config{
		DatabaseURL:  getenv("DATABASE_URL"),
		LogFormat:    "text",
		Port:         5004,
		StripeAPIKey: getenv("STRIPE_API_KEY"),
		StripeAPIURL: getenv("STRIPE_API_URL"),
		// Stripe answers charges in well under a second; 20 s rides out a slow moment without
		// coming near the lock timeout.
		StripeTimeout: 20 * time.Second,
		LockTimeout:   90 * time.Second,
	}

	var errs []string
	if v := getenv("LOG_FORMAT"); v != "" {
		if v != "text" && v != "json" {
			errs = append(errs, fmt.Sprintf("LOG_FORMAT must be text or json, not %q", v))
		}
		cfg.LogFormat = v
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := cfg.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Sprintf("LOG_LEVEL must be debug, info, warn or error, not %q", v))
		}
	}
	if v := getenv("PORT"); v != "" {
		port, err := strconv.Atoi(v)
		if err != nil || port < 1 || port > 65535 {
			errs = append(errs, fmt.Sprintf("PORT must be a port number, not %q", v))
		}
		cfg.Port = port
	}
	parseDuration := func(name string, dst *time.Duration) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Sprintf("%s must be a positive duration such as 20s, not %q", name, v))
			}
			*dst = d
		}
	}
	parseDuration("STRIPE_TIMEOUT", &cfg.StripeTimeout)
	parseDuration("IDEMPOTENCY_KEY_LOCK_TIMEOUT", &cfg.LockTimeout)
	if v := getenv("SIMULATE_ERRORS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("SIMULATE_ERRORS must be true or false, not %q", v))
		}
		cfg.SimulateErrors = b
	}

	if len(errs) == 0 && cfg.StripeTimeout*3 > cfg.LockTimeout {
		errs = append(errs, fmt.Sprintf("STRIPE_TIMEOUT (%s) must be under a third of IDEMPOTENCY_KEY_LOCK_TIMEOUT (%s)",
			cfg.StripeTimeout, cfg.LockTimeout))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}
