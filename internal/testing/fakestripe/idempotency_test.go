package fakestripe_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stripe/stripe-go/v76"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()

	t.Run("SameKeyReplaysCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")

		first, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-replay"))
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		second, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-replay"))
		if err != nil {
			t.Fatalf("error retrying charge: %v", err)
		}

		if second.ID != first.ID {
			t.Errorf("retry returned charge %s, want the original %s", second.ID, first.ID)
		}
		if replayed(first.LastResponse) || !replayed(second.LastResponse) {
			t.Errorf("Idempotent-Replayed: first %q, second %q; want only the second",
				first.LastResponse.Header.Get("Idempotent-Replayed"), second.LastResponse.Header.Get("Idempotent-Replayed"))
		}
		if got, want := second.LastResponse.Header.Get("Original-Request"), first.LastResponse.RequestID; got != want {
			t.Errorf("Original-Request %q, want the first request's id %q", got, want)
		}
		requireChargeCount(t, b.server, 1)
		if n := b.server.ChargeRequests(); n != 2 {
			t.Errorf("stand-in saw %d charge requests, want 2", n)
		}
	})

	t.Run("SameKeyReplaysDecline", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_chargeCustomerFail")

		_, firstErr := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-decline-replay"))
		_, secondErr := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-decline-replay"))

		first := requireStripeError(t, firstErr, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		second := requireStripeError(t, secondErr, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		if second.ChargeID != first.ChargeID || !replayed(second.LastResponse) {
			t.Errorf("retry: charge %q, replayed %t; want %q replayed", second.ChargeID, replayed(second.LastResponse), first.ChargeID)
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("ParamsAreComparedDecoded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")

		first, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-reordered"))
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		// Extra parameters are encoded before the struct's fields, so this body carries the
		// same values as the first in another byte order.
		reordered := rideChargeParams(cus.ID, "ride-reordered")
		reordered.Currency = nil
		reordered.AddExtra("currency", "usd")
		second, err := b.stripe.Charges.New(reordered)
		if err != nil {
			t.Fatalf("error retrying charge: %v", err)
		}

		if second.ID != first.ID || !replayed(second.LastResponse) {
			t.Errorf("retry: charge %s, replayed %t; want %s replayed", second.ID, replayed(second.LastResponse), first.ID)
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("SameKeyOtherParamsIsIdempotencyError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		if _, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-other-params")); err != nil {
			t.Fatalf("error charging: %v", err)
		}

		other := rideChargeParams(cus.ID, "ride-other-params")
		other.Amount = stripe.Int64(3000)
		_, err := b.stripe.Charges.New(other)

		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency, "")
		var idemErr *stripe.IdempotencyError
		if !errors.As(err, &idemErr) {
			t.Errorf("got %#v, want a *stripe.IdempotencyError inside", err)
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("SameKeyOtherEndpointIsIdempotencyError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		customerParams := &stripe.CustomerParams{Source: stripe.String("tok_visa")}
		customerParams.SetIdempotencyKey("shared-key")
		cus, err := b.stripe.Customers.New(customerParams)
		if err != nil {
			t.Fatalf("error creating customer: %v", err)
		}

		_, err = b.stripe.Charges.New(rideChargeParams(cus.ID, "shared-key"))

		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency, "")
		requireChargeCount(t, b.server, 0)
	})

	t.Run("ConcurrentSameKeyConflicts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		inFlight, release := make(chan struct{}), make(chan struct{})
		b.server.SetBeforeChargeHook(func() {
			close(inFlight)
			<-release
		})

		type outcome struct {
			charge *stripe.Charge
			err    error
		}
		firstDone := make(chan outcome)
		go func() {
			ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-concurrent"))
			firstDone <- outcome{ch, err}
		}()
		<-inFlight
		_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-concurrent"))
		close(release)
		first := <-firstDone

		requireStripeError(t, err, http.StatusConflict, stripe.ErrorTypeIdempotency, stripe.ErrorCodeIdempotencyKeyInUse)
		if first.err != nil {
			t.Fatalf("error in the first request: %v", first.err)
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("ValidationErrorIsNotSaved", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		_, err := b.stripe.Charges.New(rideChargeParams("cus_typo", "ride-fixed"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "resource_missing")

		// Stripe saves no result for a request that failed validation, so the key is free.
		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-fixed"))
		if err != nil {
			t.Fatalf("error charging with the corrected request: %v", err)
		}
		if replayed(ch.LastResponse) {
			t.Errorf("corrected request answered as a replay")
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("KeysAreScopedByAPIKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		otherAccount := newStripeClient(t, b.server.URL, "sk_test_other_account", &http.Transport{})

		first, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-scoped"))
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		second, err := otherAccount.Charges.New(rideChargeParams(cus.ID, "ride-scoped"))
		if err != nil {
			t.Fatalf("error charging with the other key: %v", err)
		}

		if second.ID == first.ID || replayed(second.LastResponse) {
			t.Errorf("other API key got the first key's charge %s", first.ID)
		}
		requireChargeCount(t, b.server, 2)
	})
}
