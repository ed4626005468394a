package fakestripe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"
)

func TestCustomers(t *testing.T) {
	t.Parallel()

	t.Run("CreatesCustomerWithCard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		cus, err := b.stripe.Customers.New(&stripe.CustomerParams{
			Email:       stripe.String("rider@example.com"),
			Description: stripe.String("Rocket rider"),
			Source:      stripe.String("tok_visa"),
		})
		if err != nil {
			t.Fatalf("error creating customer: %v", err)
		}
		if !strings.HasPrefix(cus.ID, "cus_") || cus.Object != "customer" || cus.Livemode {
			t.Errorf("got id %q, object %q, livemode %t; want a test-mode customer", cus.ID, cus.Object, cus.Livemode)
		}
		if cus.Email != "rider@example.com" || cus.Description != "Rocket rider" || cus.Created == 0 {
			t.Errorf("got email %q, description %q, created %d", cus.Email, cus.Description, cus.Created)
		}
		if cus.DefaultSource == nil || !strings.HasPrefix(cus.DefaultSource.ID, "card_") {
			t.Errorf("got default source %+v, want the card made from tok_visa", cus.DefaultSource)
		}

		got, err := b.stripe.Customers.Get(cus.ID, nil)
		if err != nil {
			t.Fatalf("error retrieving customer: %v", err)
		}
		if got.ID != cus.ID || got.Email != cus.Email {
			t.Errorf("retrieved %q <%s>, want %q <%s>", got.ID, got.Email, cus.ID, cus.Email)
		}
	})

	t.Run("UnknownTokenIsInvalidRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		_, err := b.stripe.Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_bogus")})

		stripeErr := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "resource_missing")
		if stripeErr.Param != "source" || stripeErr.Msg != "No such token: 'tok_bogus'" {
			t.Errorf("got param %q, message %q", stripeErr.Param, stripeErr.Msg)
		}
	})

	t.Run("DeclinedCardIsCardError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		_, err := b.stripe.Customers.New(&stripe.CustomerParams{Source: stripe.String("tok_chargeDeclined")})

		requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
	})

	t.Run("UnknownCustomerIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		_, err := b.stripe.Customers.Get("cus_missing", nil)

		requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, "resource_missing")
	})
}
