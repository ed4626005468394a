package fakestripe_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

func TestCharges(t *testing.T) {
	t.Parallel()

	t.Run("ChargesCustomer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")

		params := rideChargeParams(cus.ID, "ride-123")
		params.AddMetadata("ride_id", "123")
		ch, err := b.stripe.Charges.New(params)
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}

		if !strings.HasPrefix(ch.ID, "ch_") || ch.Object != "charge" || ch.Livemode {
			t.Errorf("got id %q, object %q, livemode %t; want a test-mode charge", ch.ID, ch.Object, ch.Livemode)
		}
		if ch.Amount != 2000 || ch.Currency != stripe.CurrencyUSD || ch.Customer == nil || ch.Customer.ID != cus.ID {
			t.Errorf("got %d %s for %+v, want 2000 usd for %s", ch.Amount, ch.Currency, ch.Customer, cus.ID)
		}
		if !ch.Paid || !ch.Captured || ch.Status != stripe.ChargeStatusSucceeded || ch.AmountCaptured != 2000 {
			t.Errorf("got paid %t, captured %t, status %q, amount captured %d", ch.Paid, ch.Captured, ch.Status, ch.AmountCaptured)
		}
		if ch.Description != "Charge for ride 123" || ch.Metadata["ride_id"] != "123" || ch.Created == 0 {
			t.Errorf("got description %q, metadata %v, created %d", ch.Description, ch.Metadata, ch.Created)
		}
		if ch.Source == nil || ch.Source.Card == nil || ch.Source.Card.Last4 != "4242" {
			t.Errorf("got source %+v, want the customer's 4242 card", ch.Source)
		}
		if replayed(ch.LastResponse) {
			t.Errorf("first request answered as a replay")
		}

		stored := requireChargeCount(t, b.server, 1)[0]
		if stored.ID != ch.ID || stored.Customer != cus.ID || stored.IdempotencyKey != "ride-123" ||
			stored.Status != fakestripe.ChargeStatusSucceeded || stored.Metadata["ride_id"] != "123" {
			t.Errorf("stand-in holds %+v", stored)
		}
		if n := b.server.ChargeRequests(); n != 1 {
			t.Errorf("stand-in saw %d charge requests, want 1", n)
		}
	})

	t.Run("ChargesTokenWithoutCustomer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		ch, err := b.stripe.Charges.New(&stripe.ChargeParams{
			Amount:   stripe.Int64(500),
			Currency: stripe.String("usd"),
			Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
		})
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}
		if ch.Customer != nil || ch.Status != stripe.ChargeStatusSucceeded {
			t.Errorf("got customer %+v, status %q; want no customer, succeeded", ch.Customer, ch.Status)
		}
	})

	t.Run("DeclineIsCardError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_chargeCustomerFail")

		_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-declined"))

		stripeErr := requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		var cardErr *stripe.CardError
		if !errors.As(err, &cardErr) || cardErr.DeclineCode != stripe.DeclineCodeGenericDecline {
			t.Errorf("got %#v, want a *stripe.CardError with decline code generic_decline", stripeErr.Err)
		}
		if stripeErr.Msg != "Your card was declined." || stripeErr.DeclineCode != stripe.DeclineCodeGenericDecline {
			t.Errorf("got message %q, decline code %q", stripeErr.Msg, stripeErr.DeclineCode)
		}
		// Like Stripe, the stand-in records the failed attempt and names it in the error.
		failed := requireChargeCount(t, b.server, 1)[0]
		if failed.Status != fakestripe.ChargeStatusFailed || failed.Paid || stripeErr.ChargeID != failed.ID {
			t.Errorf("stand-in holds %+v, error names charge %q", failed, stripeErr.ChargeID)
		}
	})

	t.Run("UnknownCustomerIsInvalidRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		_, err := b.stripe.Charges.New(rideChargeParams("cus_x", "ride-unknown-customer"))

		stripeErr := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "resource_missing")
		if stripeErr.Param != "customer" || stripeErr.Msg != "No such customer: 'cus_x'" {
			t.Errorf("got param %q, message %q", stripeErr.Param, stripeErr.Msg)
		}
		requireChargeCount(t, b.server, 0)
	})

	t.Run("InvalidParamsAreNamed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")

		tests := []struct {
			name      string
			edit      func(*stripe.ChargeParams)
			wantParam string
			wantCode  stripe.ErrorCode
		}{
			{"MissingAmount", func(p *stripe.ChargeParams) { p.Amount = nil }, "amount", stripe.ErrorCodeParameterMissing},
			{"ZeroAmount", func(p *stripe.ChargeParams) { p.Amount = stripe.Int64(0) }, "amount", ""},
			{"NegativeAmount", func(p *stripe.ChargeParams) { p.Amount = stripe.Int64(-5) }, "amount", ""},
			{"FractionalAmount", func(p *stripe.ChargeParams) { p.Amount = nil; p.AddExtra("amount", "20.5") }, "amount", stripe.ErrorCodeParameterInvalidInteger},
			{"MissingCurrency", func(p *stripe.ChargeParams) { p.Currency = nil }, "currency", stripe.ErrorCodeParameterMissing},
			{"InvalidCurrency", func(p *stripe.ChargeParams) { p.Currency = stripe.String("dollars") }, "currency", ""},
			{"NoCustomerOrSource", func(p *stripe.ChargeParams) { p.Customer = nil }, "customer", stripe.ErrorCodeParameterMissing},
			{"SourceNotTheCustomers", func(p *stripe.ChargeParams) { p.SetSource("tok_visa") }, "source", stripe.ErrorCodeMissing},
			{"UnknownParam", func(p *stripe.ChargeParams) { p.AddExtra("amount_in_dollars", "20") }, "amount_in_dollars", stripe.ErrorCodeParameterUnknown},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				params := rideChargeParams(cus.ID, "ride-"+tt.name)
				tt.edit(params)

				_, err := b.stripe.Charges.New(params)

				stripeErr := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, tt.wantCode)
				if stripeErr.Param != tt.wantParam || stripeErr.Msg == "" {
					t.Errorf("got param %q, message %q; want param %q", stripeErr.Param, stripeErr.Msg, tt.wantParam)
				}
			})
		}
		requireChargeCount(t, b.server, 0)
	})

	t.Run("RetrievesCharge", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-retrieve"))
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}

		got, err := b.stripe.Charges.Get(ch.ID, nil)
		if err != nil {
			t.Fatalf("error retrieving charge: %v", err)
		}
		if got.ID != ch.ID || got.Amount != ch.Amount || got.Customer.ID != cus.ID || got.Status != ch.Status {
			t.Errorf("retrieved %+v, want %+v", got, ch)
		}
	})

	t.Run("UnknownChargeIsNotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		_, err := b.stripe.Charges.Get("ch_missing", nil)

		stripeErr := requireStripeError(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest, "resource_missing")
		if stripeErr.Msg != "No such charge: 'ch_missing'" {
			t.Errorf("got message %q", stripeErr.Msg)
		}
	})

	t.Run("ListsCustomersChargesNewestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rider := b.createCustomer(t, "tok_visa")
		other := b.createCustomer(t, "tok_visa")
		var wantIDs []string
		for _, key := range []string{"ride-1", "ride-2", "ride-3"} {
			ch, err := b.stripe.Charges.New(rideChargeParams(rider.ID, key))
			if err != nil {
				t.Fatalf("error charging: %v", err)
			}
			wantIDs = append([]string{ch.ID}, wantIDs...)
		}
		if _, err := b.stripe.Charges.New(rideChargeParams(other.ID, "other-ride")); err != nil {
			t.Fatalf("error charging: %v", err)
		}

		// A page size of 2 makes stripe-go's iterator follow has_more with starting_after.
		params := &stripe.ChargeListParams{Customer: stripe.String(rider.ID)}
		params.Limit = stripe.Int64(2)
		iter := b.stripe.Charges.List(params)
		var gotIDs []string
		for iter.Next() {
			gotIDs = append(gotIDs, iter.Charge().ID)
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("error listing charges: %v", err)
		}
		if !slices.Equal(gotIDs, wantIDs) {
			t.Errorf("listed %v, want %v", gotIDs, wantIDs)
		}

		params.Single = true
		page := b.stripe.Charges.List(params)
		if !page.Meta().HasMore || page.Meta().URL != "/v1/charges" || len(page.ChargeList().Data) != 2 {
			t.Errorf("first page: has_more %t, url %q, %d charges", page.Meta().HasMore, page.Meta().URL, len(page.ChargeList().Data))
		}
	})

	t.Run("ListingUnknownCustomerIsInvalidRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		iter := b.stripe.Charges.List(&stripe.ChargeListParams{Customer: stripe.String("cus_x")})

		requireStripeError(t, iter.Err(), http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "resource_missing")
	})
}
