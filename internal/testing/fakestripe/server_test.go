package fakestripe_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()

	t.Run("WrongKeyIsUnauthorized", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		live := newStripeClient(t, b.server.URL, "sk_live_0123456789abcd", &http.Transport{})

		_, err := live.Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_visa")})

		// Stripe answers 401 with type invalid_request_error; stripe-go v76 has no
		// authentication error type, so the status is what tells the two apart.
		stripeErr := requireStripeError(t, err, http.StatusUnauthorized, stripe.ErrorTypeInvalidRequest, "")
		var invalid *stripe.InvalidRequestError
		if !errors.As(err, &invalid) {
			t.Errorf("got %#v, want a *stripe.InvalidRequestError inside", stripeErr.Err)
		}
		if stripeErr.Msg != "Invalid API Key provided: sk_live_**********abcd" {
			t.Errorf("got message %q", stripeErr.Msg)
		}
	})

	t.Run("OnlyConfiguredKeysAreAccepted", func(t *testing.T) {
		t.Parallel()
		server := fakestripe.NewTestServer(t, fakestripe.Options{APIKeys: []string{"sk_test_only"}, Logger: testLogger(t)})
		params := &stripe.CustomerParams{Source: stripe.String("tok_visa")}

		_, err := newStripeClient(t, server.URL, "sk_test_only", &http.Transport{}).Customers.New(params)
		if err != nil {
			t.Fatalf("error with the configured key: %v", err)
		}
		_, err = newStripeClient(t, server.URL, testAPIKey, &http.Transport{}).Customers.New(params)
		requireStripeError(t, err, http.StatusUnauthorized, stripe.ErrorTypeInvalidRequest, "")
	})
}

func TestUnrecognizedURLIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)

	_, err := b.stripe.PaymentIntents.New(&stripe.PaymentIntentParams{Amount: stripe.Int64(2000), Currency: stripe.String("usd")})

	stripeErr := requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, "")
	if !strings.Contains(stripeErr.Msg, "Unrecognized request URL (POST: /v1/payment_intents)") {
		t.Errorf("got message %q", stripeErr.Msg)
	}
}

func TestTimeoutFaultHang(t *testing.T) {
	t.Parallel()

	t.Run("DropsConnectionWhenClientWaitsLonger", func(t *testing.T) {
		t.Parallel()
		server := fakestripe.NewTestServer(t, fakestripe.Options{TimeoutFaultHang: 20 * time.Millisecond, Logger: testLogger(t)})
		sc := newStripeClient(t, server.URL, testAPIKey, &http.Transport{DisableKeepAlives: true})
		server.InjectChargeFaults(fakestripe.FaultTimeout, 1)

		_, err := sc.Charges.New(&stripe.ChargeParams{
			Amount:   stripe.Int64(2000),
			Currency: stripe.String("usd"),
			Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
		})

		if !errors.Is(err, io.EOF) {
			t.Fatalf("got error %v (%T), want the connection's EOF", err, err)
		}
		requireChargeCount(t, server, 0)
	})

	t.Run("CloseReleasesHeldRequests", func(t *testing.T) {
		t.Parallel()
		server := fakestripe.NewTestServer(t, fakestripe.Options{Logger: testLogger(t)})
		sc := newStripeClient(t, server.URL, testAPIKey, &http.Transport{DisableKeepAlives: true})
		server.InjectChargeFaults(fakestripe.FaultTimeout, 1)

		done := make(chan error)
		go func() {
			_, err := sc.Charges.New(&stripe.ChargeParams{
				Amount:   stripe.Int64(2000),
				Currency: stripe.String("usd"),
				Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
			})
			done <- err
		}()
		for server.ChargeRequests() == 0 { // wait until the request is held
			time.Sleep(time.Millisecond)
		}
		server.Close()

		if err := <-done; !errors.Is(err, io.EOF) {
			t.Fatalf("got error %v (%T), want the connection's EOF", err, err)
		}
	})
}

// TestTimeoutFaultBehindReadTimeout covers cmd/fakestripe, whose http.Server has a ReadTimeout:
// when it passes, net/http cancels the request's context although the client still waits, and
// a handler that then returned without a word would make net/http answer an empty 200.
func TestTimeoutFaultBehindReadTimeout(t *testing.T) {
	t.Parallel()
	server := fakestripe.New(fakestripe.Options{TimeoutFaultHang: 150 * time.Millisecond, Logger: testLogger(t)})
	hs := httptest.NewUnstartedServer(server)
	hs.Config.ReadTimeout = 50 * time.Millisecond
	hs.Start()
	t.Cleanup(func() {
		server.Close()
		hs.Close()
	})
	sc := newStripeClient(t, hs.URL, testAPIKey, &http.Transport{DisableKeepAlives: true})
	server.InjectChargeFaults(fakestripe.FaultTimeout, 1)

	_, err := sc.Charges.New(&stripe.ChargeParams{
		Amount:   stripe.Int64(2000),
		Currency: stripe.String("usd"),
		Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
	})

	if !errors.Is(err, io.EOF) {
		t.Fatalf("got error %v (%T), want the connection's EOF", err, err)
	}
}
