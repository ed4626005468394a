// Package stripeclient builds the stripe-go client the service charges through, configured the
// way idempotent charging needs it.
package stripeclient

import (
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// Config says which Stripe to talk to and how patiently.
type Config struct {
	APIKey string

	// URL is the base URL of the Stripe API; empty means Stripe's own. Tests and dev point it
	// at the Stripe stand-in.
	URL string

	// Timeout bounds one call. It must stay well under the idempotency key lock timeout, so
	// that a request stuck on Stripe gives up before another request may take its key over.
	Timeout time.Duration

	// Transport, if set, replaces http.DefaultTransport. Note that Go's transport itself
	// re-sends a request carrying an Idempotency-Key when a reused keep-alive connection closes
	// before any answer; that is safe exactly because the key makes Stripe replay.
	Transport http.RoundTripper
}

// New returns a client with stripe-go's own retries turned off. stripe-go would otherwise retry
// inside one call, invisibly and past our timeout budget; we retry instead, at the level of the
// request, where the recovery point and the lock are.
func New(cfg Config) *client.API {
	backendConfig := &stripe.BackendConfig{
		HTTPClient:        &http.Client{Timeout: cfg.Timeout, Transport: cfg.Transport},
		MaxNetworkRetries: stripe.Int64(0),
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
