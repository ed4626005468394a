package bootstrap

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()

	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Port != 5004 || cfg.LockLease != 5*time.Second || cfg.StripeTimeout != 20*time.Second ||
			cfg.SimulateErrors || cfg.LogFormat != "text" || cfg.LogLevel != slog.LevelInfo || cfg.StripeAPIURL != "" ||
			cfg.RateLimits.Off || cfg.MetricsAddr != "" || cfg.WorkerPollInterval != time.Second || cfg.EnqueuerPollInterval != time.Second {
			t.Fatalf("unexpected defaults %+v", cfg)
		}
	})

	t.Run("Overrides", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(map[string]string{
			"DATABASE_URL": "postgres://db", "PORT": "8080", "STRIPE_API_KEY": "sk_test_1",
			"STRIPE_API_URL": "http://127.0.0.1:12111", "SIMULATE_ERRORS": "true", "LOG_FORMAT": "json",
			"LOG_LEVEL": "debug", "STRIPE_TIMEOUT": "5s", "IDEMPOTENCY_KEY_LEASE": "8s",
			"METRICS_ADDR": ":9100", "RIDER_RIDES_PER_MINUTE": "30", "MAX_REQUESTS_IN_FLIGHT": "50",
			"WORKER_POLL_INTERVAL": "5s", "ENQUEUER_POLL_INTERVAL": "2s",
			"RIDER_CANCELS_PER_MINUTE": "4", "RIDER_CANCEL_BURST": "2", "RIDER_REQUESTS_PER_MINUTE": "90", "RIDER_REQUEST_BURST": "45",
		}))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DatabaseURL != "postgres://db" || cfg.Port != 8080 || cfg.StripeAPIKey != "sk_test_1" ||
			cfg.StripeAPIURL != "http://127.0.0.1:12111" || !cfg.SimulateErrors || cfg.LogFormat != "json" ||
			cfg.LogLevel != slog.LevelDebug || cfg.StripeTimeout != 5*time.Second || cfg.LockLease != 8*time.Second ||
			cfg.MetricsAddr != ":9100" || cfg.RateLimits.Off || cfg.RateLimits.RiderRidesPerMinute != 30 ||
			cfg.RateLimits.MaxRequestsInFlight != 50 || cfg.WorkerPollInterval != 5*time.Second || cfg.EnqueuerPollInterval != 2*time.Second ||
			cfg.RateLimits.RiderCancelsPerMinute != 4 || cfg.RateLimits.RiderCancelBurst != 2 ||
			cfg.RateLimits.RiderRequestsPerMinute != 90 || cfg.RateLimits.RiderRequestBurst != 45 {
			t.Fatalf("unexpected config %+v", cfg)
		}
	})

	t.Run("TrustedProxies", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7,2001:db8::/32"}))
		if err != nil {
			t.Fatal(err)
		}
		want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}
		if !slices.Equal(cfg.TrustedProxies, want) {
			t.Fatalf("want %v, got %v", want, cfg.TrustedProxies)
		}
	})

	// A prefix is a path a reverse proxy routes: written with or without its trailing slash,
	// it is the same prefix; "/" is the root.
	t.Run("UIPathPrefix", func(t *testing.T) {
		t.Parallel()
		for v, want := range map[string]string{"/river": "/river", "/river/": "/river", "/ops/river": "/ops/river", "/": ""} {
			cfg, err := LoadConfig(env(map[string]string{"UI_PATH_PREFIX": v}))
			if err != nil || cfg.UIPathPrefix != want {
				t.Errorf("UI_PATH_PREFIX=%s: want %q, got %+v, %v", v, want, cfg, err)
			}
		}
	})

	// A lease far longer than its default is no mistake: renewals only come further apart.
	t.Run("LongLease", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(map[string]string{"IDEMPOTENCY_KEY_LEASE": "1m"}))
		if err != nil || cfg.LockLease != time.Minute {
			t.Fatalf("want a lease of a minute, got %v", err)
		}
	})

	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"BadPort", map[string]string{"PORT": "http"}, "PORT"},
		{"BadTrustedProxy", map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,lb.internal"}, "TRUSTED_PROXIES"},
		{"PortOutOfRange", map[string]string{"PORT": "70000"}, "PORT"},
		{"MetricsAddrWithoutPort", map[string]string{"METRICS_ADDR": "localhost"}, "METRICS_ADDR"},
		{"UIAddrWithoutPort", map[string]string{"UI_ADDR": "127.0.0.1"}, "UI_ADDR"},
		{"UIPathPrefixRelative", map[string]string{"UI_PATH_PREFIX": "river"}, "UI_PATH_PREFIX"},
		{"UIPathPrefixNotClean", map[string]string{"UI_PATH_PREFIX": "/river/../admin"}, "UI_PATH_PREFIX"},
		{"UIPathPrefixWithQuery", map[string]string{"UI_PATH_PREFIX": "/river?x=1"}, "UI_PATH_PREFIX"},
		{"RateLimitsNeitherOffNorUnset", map[string]string{"RATE_LIMITS": "lenient"}, "RATE_LIMITS"},
		{"ZeroBurst", map[string]string{"RIDER_RIDE_BURST": "0"}, "RIDER_RIDE_BURST"},
		{"ZeroCancelBurst", map[string]string{"RIDER_CANCEL_BURST": "0"}, "RIDER_CANCEL_BURST"},
		{"BadRequestRate", map[string]string{"RIDER_REQUESTS_PER_MINUTE": "lots"}, "RIDER_REQUESTS_PER_MINUTE"},
		{"BadBool", map[string]string{"SIMULATE_ERRORS": "sometimes"}, "SIMULATE_ERRORS"},
		{"BadFormat", map[string]string{"LOG_FORMAT": "xml"}, "LOG_FORMAT"},
		{"BadLevel", map[string]string{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"BadDuration", map[string]string{"STRIPE_TIMEOUT": "soon"}, "STRIPE_TIMEOUT"},
		{"ZeroWorkerPoll", map[string]string{"WORKER_POLL_INTERVAL": "0s"}, "WORKER_POLL_INTERVAL"},
		{"StripeTimeoutPastTheRequest", map[string]string{"STRIPE_TIMEOUT": "60s"}, "under the request timeout"},
		{"LeaseTooShort", map[string]string{"IDEMPOTENCY_KEY_LEASE": "500ms"}, "at least 1s"},
		{"WorkerPollUnderTheFetchCooldown", map[string]string{"WORKER_POLL_INTERVAL": "10ms"}, "WORKER_POLL_INTERVAL must be at least 25ms"},
		{"ReaperBeforeTheCompleter", map[string]string{"REAP_AFTER": "30m"}, "REAP_AFTER"},
		{"LockTimeoutIsGone", map[string]string{"IDEMPOTENCY_KEY_LOCK_TIMEOUT": "90s"}, "IDEMPOTENCY_KEY_LEASE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := LoadConfig(env(tt.env)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error naming %s, got %v", tt.want, err)
			}
		})
	}
}
