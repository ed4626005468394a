// Package stripeclient builds the stripe-go client the service charges through, configured the
// way idempotent charging needs it.
package stripeclient

import (
	"cmp"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/telemetry"
)

// Config says which Stripe to talk to and how patiently.
type Config struct {
	APIKey string

	// URL is the base URL of the Stripe API; empty means Stripe's own. Tests and dev point it
	// at the Stripe stand-in.
	URL string

	// Timeout bounds one call. Default TimeoutDefault. It must leave room within the request's
	// own bound (phases.Config.RequestTimeout), or no charge could be answered within its
	// request; cmd/internal/bootstrap's checkRules checks that.
	Timeout time.Duration

	// MaxIdleConnsPerHost is how many connections to Stripe are kept open between calls, at
	// least the calls that may be in flight at once. Default MaxIdleConnsPerHostDefault.
	MaxIdleConnsPerHost int

	// Metrics, if set, records every call and every new connection in the
	// rocketrides_stripe_* series.
	Metrics *metrics.Stripe

	// Transport, if set, replaces the client's own transport, which keeps MaxIdleConnsPerHost
	// connections and counts the new ones in Metrics. Note that Go's transport re-sends a
	// request carrying an Idempotency-Key when a reused keep-alive connection closes before any
	// answer; that is safe exactly because the key makes Stripe replay.
	Transport http.RoundTripper
}

// TimeoutDefault bounds a call to Stripe when Config.Timeout does not: Stripe answers charges in
// well under a second, and 20 s rides out a slow moment with room to spare within the request.
const TimeoutDefault = 20 * time.Second

// New returns a client with stripe-go's own retries turned off. stripe-go would otherwise retry
// inside one call, invisibly and past our timeout budget; we retry instead, at the level of the
// request, where the recovery point and the lock are.
func New(cfg Config) *client.API {
	transport := cfg.Transport
	if transport == nil {
		var dialled func()
		if cfg.Metrics != nil {
			dialled = cfg.Metrics.ConnectionsOpened.Inc
		}
		transport = newTransport(cmp.Or(cfg.MaxIdleConnsPerHost, MaxIdleConnsPerHostDefault), dialled)
	}
	if cfg.Metrics != nil {
		transport = cfg.Metrics.Transport(transport)
	}
	// Outermost, so that a traced call's span covers the whole request.
	transport = telemetry.Transport(knownLength{next: transport})
	backendConfig := &stripe.BackendConfig{
		HTTPClient:        &http.Client{Timeout: cmp.Or(cfg.Timeout, TimeoutDefault), Transport: transport},
		MaxNetworkRetries: stripe.Int64(0),
		// stripe-go would report each call's latency to Stripe in a header of the next, encoding
		// it as JSON on every call; the API measures its calls itself
		// (rocketrides_stripe_request_duration_seconds).
		EnableTelemetry: stripe.Bool(false),
		// The caller logs failures at its boundary; stripe-go's own logging would duplicate them.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.URL != "" {
		backendConfig.URL = stripe.String(cfg.URL)
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, backendConfig)

	sc := &client.API{}
	sc.Init(cfg.APIKey, &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	return sc
}
