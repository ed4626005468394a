package stripemock_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/testing/stripemock"
)

func TestStart(t *testing.T) {
	t.Parallel()
	url := stripemock.Start(t)

	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(url),
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        &http.Client{},
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := &client.API{}
	sc.Init("sk_test_stripemock", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})

	t.Run("AcceptsCharge", func(t *testing.T) {
		params := &stripe.ChargeParams{
			Amount:   stripe.Int64(2000),
			Currency: stripe.String(string(stripe.CurrencyUSD)),
			Customer: stripe.String("cus_123"),
		}
		params.SetIdempotencyKey("ride-123")

		ch, err := sc.Charges.New(params)

		if err != nil {
			t.Fatalf("error charging through stripe-mock: %v", err)
		}
		if !strings.HasPrefix(ch.ID, "ch_") || ch.Object != "charge" {
			t.Errorf("got id %q, object %q; want a charge", ch.ID, ch.Object)
		}
	})

	// The point of stripe-mock is that it checks requests against Stripe's spec. It checks
	// names and types, not that required parameters are present: it accepts a charge without
	// amount or currency.
	t.Run("RejectsUnknownChargeParam", func(t *testing.T) {
		params := &stripe.ChargeParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd")}
		params.AddExtra("amount_in_dollars", "20")

		_, err := sc.Charges.New(params)

		var stripeErr *stripe.Error
		if !errors.As(err, &stripeErr) || stripeErr.HTTPStatusCode != http.StatusBadRequest {
			t.Fatalf("got %v, want a 400 from stripe-mock", err)
		}
	})
}
