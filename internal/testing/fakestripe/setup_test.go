package fakestripe_test

import (
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

const testAPIKey = "sk_test_rocketrides"

// testBundle is a stand-in and a real stripe-go client pointed at it.
type testBundle struct {
	server *fakestripe.TestServer
	stripe *client.API
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	server := fakestripe.NewTestServer(t, fakestripe.Options{Logger: testLogger(t)})
	return &testBundle{server: server, stripe: newStripeClient(t, server.URL, testAPIKey, &http.Transport{})}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newStripeClient configures stripe-go the way Rocket Rides does: no retries of its own, so that
// every request a test makes reaches the stand-in exactly once.
func newStripeClient(t *testing.T, url, apiKey string, transport *http.Transport) *client.API {
	t.Helper()
	t.Cleanup(transport.CloseIdleConnections)
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(url),
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        &http.Client{Transport: transport},
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	sc := &client.API{}
	sc.Init(apiKey, &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	return sc
}

func (b *testBundle) createCustomer(t *testing.T, token string) *stripe.Customer {
	t.Helper()
	cus, err := b.stripe.Customers.New(&stripe.CustomerParams{
		Email:  stripe.String("rider@example.com"),
		Source: stripe.String(token),
	})
	if err != nil {
		t.Fatalf("error creating customer: %v", err)
	}
	return cus
}

// rideChargeParams is the charge Rocket Rides makes for a ride, under an idempotency key.
func rideChargeParams(customerID, idempotencyKey string) *stripe.ChargeParams {
	params := &stripe.ChargeParams{
		Amount:      stripe.Int64(2000),
		Currency:    stripe.String(string(stripe.CurrencyUSD)),
		Customer:    stripe.String(customerID),
		Description: stripe.String("Charge for ride 123"),
	}
	params.SetIdempotencyKey(idempotencyKey)
	return params
}

// requireStripeError asserts that err is the *stripe.Error stripe-go makes of an answer with
// this status, type and code, and returns it.
func requireStripeError(t *testing.T, err error, status int, typ stripe.ErrorType, code stripe.ErrorCode) *stripe.Error {
	t.Helper()
	var stripeErr *stripe.Error
	if !errors.As(err, &stripeErr) {
		t.Fatalf("got error %v (%T), want a *stripe.Error", err, err)
	}
	if stripeErr.HTTPStatusCode != status || stripeErr.Type != typ || stripeErr.Code != code {
		t.Fatalf("got status %d, type %q, code %q (%s); want %d, %q, %q",
			stripeErr.HTTPStatusCode, stripeErr.Type, stripeErr.Code, stripeErr.Msg, status, typ, code)
	}
	return stripeErr
}

// requireChargeCount asserts how many charges the stand-in holds.
func requireChargeCount(t *testing.T, server *fakestripe.TestServer, want int) []fakestripe.Charge {
	t.Helper()
	charges := server.Charges()
	if len(charges) != want {
		t.Fatalf("stand-in holds %d charges, want %d: %+v", len(charges), want, charges)
	}
	return charges
}

func replayed(r *stripe.APIResponse) bool {
	return r != nil && r.Header.Get("Idempotent-Replayed") == "true"
}
