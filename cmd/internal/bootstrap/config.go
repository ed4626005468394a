// Package bootstrap is what every Rocket Rides process does before its real work starts:
// read configuration from the environment, build a logger, open and check the database pool,
// build the Stripe client and the phase executor, and run until SIGINT or SIGTERM.
package bootstrap

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/completer"
	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/authtoken"
	"github.com/rocketrides/rocketrides/internal/connguard"
	"github.com/rocketrides/rocketrides/internal/stripeclient"
	"github.com/rocketrides/rocketrides/phases"
	"github.com/rocketrides/rocketrides/reaper"
	"github.com/rocketrides/rocketrides/workers"
)

// Config is every setting any process reads, parsed once from the environment. A process uses
// the fields it needs; each field says its variable and its default, the value and the constant
// it comes from (TestConfigDocs holds the two together).
type Config struct {
	// DatabaseURL (DATABASE_URL, required) is the Postgres connection string.
	DatabaseURL string

	// PoolMaxConnsAtLeast is set by a process, not read from the environment: the fewest
	// connections its pool may have (the worker's: workers.PoolMaxConns). OpenPool raises a
	// smaller pool_max_conns to it, since a smaller pool would starve the process's work; the
	// process's own setting (WORKER_CONCURRENCY) is the knob for fewer connections.
	PoolMaxConnsAtLeast int32

	// SchemaAsIs is set by a process, not read from the environment: it works on whichever
	// schema the database holds, so OpenPool does not require every migration. admin seed sets
	// it: it writes rides the way the schema at hand makes ids, the article's earlier schema
	// included, which the benchmark seeds.
	SchemaAsIs bool

	// LogFormat (LOG_FORMAT, default "text", LogFormatDefault) is "text" or "json".
	LogFormat string

	// LogLevel (LOG_LEVEL, default "info") is debug, info, warn or error.
	LogLevel slog.Level

	// Port (PORT, default 5004, api.PortDefault) is the API's listening port, and River's UI's
	// when UI_ADDR is unset: a Procfile manager gives each process a PORT of its own.
	Port int

	// TrustedProxies (TRUSTED_PROXIES, default unset) are the load balancers in front of the
	// API, as comma-separated addresses or CIDR prefixes, whose X-Forwarded-For the API believes
	// to find a client's address; unset, the TCP peer is the client (see api.Config).
	TrustedProxies []netip.Prefix

	// MaxConnections (MAX_CONNECTIONS, default 4096, connguard.MaxConnsDefault) caps the API's
	// open connections; at the cap, the one that has waited longest for a request is closed to
	// make room (see internal/connguard).
	MaxConnections int

	// MaxConnectionsPerAddress (MAX_CONNECTIONS_PER_ADDRESS, default 100,
	// connguard.MaxConnsPerAddrDefault) caps the API's connections from one client address,
	// likewise; the TRUSTED_PROXIES are exempt.
	MaxConnectionsPerAddress int

	// Host (HOST, default unset) is the address the API listens on; unset, every address of
	// the machine, as a Procfile's platform expects. A development stack sets 127.0.0.1, so that
	// a stack with demo settings (SIMULATE_ERRORS) is reached from this machine alone.
	Host string

	// MetricsAddr (METRICS_ADDR, default unset) is the host:port where a process serves its
	// Prometheus metrics at GET /metrics; unset, it serves none. The API's must differ from its
	// public port: the figures are for the operator, not for riders.
	MetricsAddr string

	// StripeAPIKey (STRIPE_API_KEY, required to charge) is the secret key charges are made with.
	StripeAPIKey string

	// APITokenSecret (API_TOKEN_SECRET, required by the API, admin create-user and
	// reissue-token, and the simulator when it makes its own riders) is the secret riders' API tokens carry a MAC under, at least
	// authtoken.SecretMinBytes bytes: `openssl rand -base64 32` makes one. The API refuses a
	// token without a valid MAC before any lookup. It has no default, as a payment service keeps
	// no secret in its source: a published one would let anyone's made-up tokens cost lookups
	// again. go run ./cmd/dev sets a development one.
	APITokenSecret string

	// StripeWebhookSecret (STRIPE_WEBHOOK_SECRET, default unset: webhooks off) is the signing
	// secret of our webhook endpoint at Stripe, which the API verifies every event at
	// POST /webhooks/stripe with.
	StripeWebhookSecret string

	// StripeAPIURL (STRIPE_API_URL, default unset: Stripe's own) is the base URL of the Stripe
	// API.
	StripeAPIURL string

	// StripeTimeout (STRIPE_TIMEOUT, default 20s, stripeclient.TimeoutDefault) bounds one call to
	// Stripe. It must leave room within the bound on a whole request; see checkRules.
	StripeTimeout time.Duration

	// LockLease (IDEMPOTENCY_KEY_LEASE, default 5s, phases.LockLeaseDefault) is how long a
	// request's lock on its key lasts unless the request renews it, which a live request does
	// every third of it: so how soon a key is free again after its request died. At least
	// phases.LockLeaseMin. It replaces the article's lock timeout, IDEMPOTENCY_KEY_LOCK_TIMEOUT,
	// which is refused now rather than silently ignored.
	LockLease time.Duration

	// RateLimits (RATE_LIMITS, unset for on) are the API's limits (see api.Limits): off turns
	// them all off, for load tests. Each limit's own variable overrides its
	// default: RIDER_RIDES_PER_MINUTE, RIDER_RIDE_BURST (new bookings), RIDER_CANCELS_PER_MINUTE,
	// RIDER_CANCEL_BURST (new cancels), RIDER_REQUESTS_PER_MINUTE, RIDER_REQUEST_BURST,
	// RIDER_RIDES_IN_FLIGHT (bookings and cancels, retries and replays included),
	// RIDER_READS_PER_MINUTE, RIDER_READ_BURST, RIDER_READS_IN_FLIGHT, MAX_REQUESTS_IN_FLIGHT.
	RateLimits api.Limits

	// SimulateErrors (SIMULATE_ERRORS, default false) allows the raise_error demo parameter.
	SimulateErrors bool

	// Faults (FAULTS, default unset) arms crash and stall points in the API for failure tests;
	// see internal/faults. Never set it in production.
	Faults string

	// SMTPURL (SMTP_URL, default unset) is where receipts are mailed:
	// smtp://[user:pass@]host:port (STARTTLS when offered) or smtps://... (implicit TLS).
	// Unset, the worker writes each rendered receipt to its log instead.
	SMTPURL string

	// MailFrom (MAIL_FROM, default "Rocket Rides <receipts@rocketrides.example>",
	// workers.MailFromDefault) is the receipts' From address.
	MailFrom string

	// WorkerConcurrency (WORKER_CONCURRENCY, default 10, workers.ConcurrencyDefault) is how many
	// jobs a worker runs at once.
	WorkerConcurrency int

	// WorkerPollInterval (WORKER_POLL_INTERVAL, default 1s, workers.PollIntervalDefault) is how
	// often the worker looks for jobs when no notification woke it: the fallback for a missed
	// NOTIFY, one query each time. At least workers.FetchCooldown.
	WorkerPollInterval time.Duration

	// EnqueuerPollInterval (ENQUEUER_POLL_INTERVAL, default 1s, enqueuer.PollIntervalDefault) is
	// how often the enqueuer looks for staged jobs when no notification woke it: the fallback for
	// a missed NOTIFY.
	EnqueuerPollInterval time.Duration

	// CompleterInterval (COMPLETER_INTERVAL, default 5s, completer.IntervalDefault) is the
	// completer's sleep between passes that found nothing to do.
	CompleterInterval time.Duration

	// CompleterMinAge (COMPLETER_MIN_AGE, default 5m, completer.MinAgeDefault) is how old a key
	// must be before the completer considers its client gone; younger ones are left to the
	// client's own retries. It must leave the completer time before the reaper; see checkRules.
	CompleterMinAge time.Duration

	// CompleterIdleFor (COMPLETER_IDLE_FOR, default 60s, completer.IdleForDefault) is how long a
	// key must not have been run before the completer picks it up.
	CompleterIdleFor time.Duration

	// ReaperInterval (REAPER_INTERVAL, default 1m, reaper.IntervalDefault) is the reaper's sleep
	// between passes that found nothing to do.
	ReaperInterval time.Duration

	// ReapAfter (REAP_AFTER, default 72h, reaper.ReapAfterDefault) is the age at which keys are
	// deleted.
	ReapAfter time.Duration

	// UIAddr (UI_ADDR, default unset: 127.0.0.1 on PORT) is the host:port where admin ui serves
	// River's UI. Beyond loopback, admin ui refuses to start without UIUsername and UIPassword.
	UIAddr string

	// UIUsername (UI_USERNAME, default unset) is the user name River's UI asks every request
	// for, with UIPassword, through HTTP basic auth; unset, it asks for none.
	UIUsername string

	// UIPassword (UI_PASSWORD, default unset) is the password that goes with UIUsername.
	UIPassword string

	// UIPathPrefix (UI_PATH_PREFIX, default unset: the root) is the path River's UI answers
	// under, such as /river, for a reverse proxy that routes that path to admin ui unchanged.
	UIPathPrefix string
}

// ConnGuard returns the API server's guard of its connections, which tells shed of each one it
// closes to make room.
func (cfg *Config) ConnGuard(shed func(reason string)) *connguard.Guard {
	return connguard.New(connguard.Limits{
		MaxConns:        cfg.MaxConnections,
		MaxConnsPerAddr: cfg.MaxConnectionsPerAddress,
		TrustedProxies:  cfg.TrustedProxies,
		Shed:            shed,
	})
}

// TokenKey returns the key riders' API tokens are made and checked with, or an error saying how
// to set API_TOKEN_SECRET, which the processes that need it call for.
func (cfg *Config) TokenKey() (authtoken.Key, error) {
	if cfg.APITokenSecret == "" {
		return authtoken.Key{}, errors.New("invalid configuration: API_TOKEN_SECRET is required: the secret API tokens are " +
			"made and checked with, the same for the API and admin, at least 32 bytes; make one with `openssl rand -base64 32` " +
			"(go run ./cmd/dev sets a development one)")
	}
	return authtoken.ParseKey(cfg.APITokenSecret)
}

// LoadConfig reads the configuration through getenv (os.Getenv outside tests).
func LoadConfig(getenv func(string) string) (*Config, error) {
	cfg := &Config{
		DatabaseURL:  getenv("DATABASE_URL"),
		LogFormat:    LogFormatDefault,
		Port:         api.PortDefault,
		StripeAPIKey: getenv("STRIPE_API_KEY"),

		APITokenSecret: getenv("API_TOKEN_SECRET"),
		StripeAPIURL:   getenv("STRIPE_API_URL"),

		StripeWebhookSecret: getenv("STRIPE_WEBHOOK_SECRET"),
		MetricsAddr:         getenv("METRICS_ADDR"),
		Host:                getenv("HOST"),
		SMTPURL:             getenv("SMTP_URL"),
		Faults:              getenv("FAULTS"),
		UIAddr:              getenv("UI_ADDR"),
		UIUsername:          getenv("UI_USERNAME"),
		UIPassword:          getenv("UI_PASSWORD"),
		MailFrom:            cmp.Or(getenv("MAIL_FROM"), workers.MailFromDefault),

		MaxConnections:           connguard.MaxConnsDefault,
		MaxConnectionsPerAddress: connguard.MaxConnsPerAddrDefault,

		StripeTimeout:        stripeclient.TimeoutDefault,
		LockLease:            phases.LockLeaseDefault,
		WorkerConcurrency:    workers.ConcurrencyDefault,
		WorkerPollInterval:   workers.PollIntervalDefault,
		EnqueuerPollInterval: enqueuer.PollIntervalDefault,
		CompleterInterval:    completer.IntervalDefault,
		CompleterMinAge:      completer.MinAgeDefault,
		CompleterIdleFor:     completer.IdleForDefault,
		ReaperInterval:       reaper.IntervalDefault,
		ReapAfter:            reaper.ReapAfterDefault,
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
	for _, item := range strings.Split(getenv("TRUSTED_PROXIES"), ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(item)
		if addr, addrErr := netip.ParseAddr(item); addrErr == nil {
			prefix, err = addr.Prefix(addr.BitLen())
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("TRUSTED_PROXIES must be addresses or CIDR prefixes, not %q", item))
			continue
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, prefix.Masked())
	}
	if v := getenv("PORT"); v != "" {
		port, err := strconv.Atoi(v)
		if err != nil || port < 1 || port > 65535 {
			errs = append(errs, fmt.Sprintf("PORT must be a port number, not %q", v))
		}
		cfg.Port = port
	}
	if cfg.MetricsAddr != "" {
		if _, port, err := net.SplitHostPort(cfg.MetricsAddr); err != nil || port == "" {
			errs = append(errs, fmt.Sprintf("METRICS_ADDR must be host:port, such as 127.0.0.1:9100 or :9100, not %q", cfg.MetricsAddr))
		}
	}
	if cfg.UIAddr != "" {
		if _, port, err := net.SplitHostPort(cfg.UIAddr); err != nil || port == "" {
			errs = append(errs, fmt.Sprintf("UI_ADDR must be host:port, such as 127.0.0.1:5504, not %q", cfg.UIAddr))
		}
	}
	if v := getenv("UI_PATH_PREFIX"); v != "" {
		prefix, err := parsePathPrefix(v)
		if err != nil {
			errs = append(errs, "UI_PATH_PREFIX "+err.Error())
		}
		cfg.UIPathPrefix = prefix
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
	parseDuration("IDEMPOTENCY_KEY_LEASE", &cfg.LockLease)
	if cfg.LockLease > 0 && cfg.LockLease < phases.LockLeaseMin {
		errs = append(errs, fmt.Sprintf("IDEMPOTENCY_KEY_LEASE must be at least %s, so that its renewals stay far apart next to a database round trip, not %s",
			phases.LockLeaseMin, cfg.LockLease))
	}
	if getenv("IDEMPOTENCY_KEY_LOCK_TIMEOUT") != "" {
		errs = append(errs, fmt.Sprintf("IDEMPOTENCY_KEY_LOCK_TIMEOUT is gone: a key's lock is now a lease its request renews, "+
			"set with IDEMPOTENCY_KEY_LEASE (default %s); unset IDEMPOTENCY_KEY_LOCK_TIMEOUT", phases.LockLeaseDefault))
	}
	parseDuration("ENQUEUER_POLL_INTERVAL", &cfg.EnqueuerPollInterval)
	parseDuration("WORKER_POLL_INTERVAL", &cfg.WorkerPollInterval)
	if cfg.WorkerPollInterval > 0 && cfg.WorkerPollInterval < workers.FetchCooldown {
		errs = append(errs, fmt.Sprintf("WORKER_POLL_INTERVAL must be at least %s, the worker's shortest time between fetches, not %s",
			workers.FetchCooldown, cfg.WorkerPollInterval))
	}
	parseDuration("COMPLETER_INTERVAL", &cfg.CompleterInterval)
	parseDuration("COMPLETER_MIN_AGE", &cfg.CompleterMinAge)
	parseDuration("COMPLETER_IDLE_FOR", &cfg.CompleterIdleFor)
	parseDuration("REAPER_INTERVAL", &cfg.ReaperInterval)
	parseDuration("REAP_AFTER", &cfg.ReapAfter)
	parsePositive := func(name string, dst *int) {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				errs = append(errs, fmt.Sprintf("%s must be a positive number, not %q", name, v))
			}
			*dst = n
		}
	}
	parsePositive("WORKER_CONCURRENCY", &cfg.WorkerConcurrency)
	parsePositive("MAX_CONNECTIONS", &cfg.MaxConnections)
	parsePositive("MAX_CONNECTIONS_PER_ADDRESS", &cfg.MaxConnectionsPerAddress)
	switch v := getenv("RATE_LIMITS"); v {
	case "", "on":
	case "off":
		cfg.RateLimits.Off = true
	default:
		errs = append(errs, fmt.Sprintf("RATE_LIMITS must be off (or unset, for the defaults), not %q", v))
	}
	parsePositive("RIDER_RIDES_PER_MINUTE", &cfg.RateLimits.RiderRidesPerMinute)
	parsePositive("RIDER_RIDE_BURST", &cfg.RateLimits.RiderRideBurst)
	parsePositive("RIDER_CANCELS_PER_MINUTE", &cfg.RateLimits.RiderCancelsPerMinute)
	parsePositive("RIDER_CANCEL_BURST", &cfg.RateLimits.RiderCancelBurst)
	parsePositive("RIDER_REQUESTS_PER_MINUTE", &cfg.RateLimits.RiderRequestsPerMinute)
	parsePositive("RIDER_REQUEST_BURST", &cfg.RateLimits.RiderRequestBurst)
	parsePositive("RIDER_RIDES_IN_FLIGHT", &cfg.RateLimits.RiderRidesInFlight)
	parsePositive("RIDER_READS_PER_MINUTE", &cfg.RateLimits.RiderReadsPerMinute)
	parsePositive("RIDER_READ_BURST", &cfg.RateLimits.RiderReadBurst)
	parsePositive("RIDER_READS_IN_FLIGHT", &cfg.RateLimits.RiderReadsInFlight)
	for _, name := range []string{"AUTH_FAILURES_PER_MINUTE", "AUTH_FAILURE_BURST", "AUTH_LIMITED_LOOKUPS_PER_MINUTE"} {
		if getenv(name) != "" {
			errs = append(errs, fmt.Sprintf("%s is gone: a token the API did not issue is refused without a lookup "+
				"(API_TOKEN_SECRET), so failed authentications cost nothing to limit; unset %s", name, name))
		}
	}
	if cfg.APITokenSecret != "" {
		if _, err := authtoken.ParseKey(cfg.APITokenSecret); err != nil {
			errs = append(errs, "API_TOKEN_SECRET: "+err.Error())
		}
	}
	parsePositive("MAX_REQUESTS_IN_FLIGHT", &cfg.RateLimits.MaxRequestsInFlight)
	if v := getenv("SIMULATE_ERRORS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("SIMULATE_ERRORS must be true or false, not %q", v))
		}
		cfg.SimulateErrors = b
	}

	if len(errs) == 0 {
		errs = append(errs, checkRules(cfg, cfg.executorConfig().WithDefaults())...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}

// parsePathPrefix returns v, a path such as /river or /river/, without its trailing slash: the
// path a reverse proxy routes to a process. "/" is the root, returned as "".
func parsePathPrefix(v string) (string, error) {
	prefix := strings.TrimSuffix(v, "/")
	if !strings.HasPrefix(v, "/") || path.Clean(v) != cmp.Or(prefix, "/") || strings.ContainsAny(v, "?#%\\ \t") {
		return "", fmt.Errorf("must be a clean absolute path such as /river, not %q", v)
	}
	return prefix, nil
}
