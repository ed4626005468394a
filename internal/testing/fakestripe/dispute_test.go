package fakestripe_test

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// controlRefusal is the control API's answer to a refused dashboard action.
type controlRefusal struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// TestDashboard refunds and disputes charges as Stripe's dashboard and a rider's bank would,
// through the control API and the Go methods.
func TestDashboard(t *testing.T) {
	t.Parallel()

	t.Run("RefundOverHTTP", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge := b.chargeRide(t, "ride-1")

		var refund stripe.Refund
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/refund", "", http.StatusOK, &refund)
		if refund.Object != "refund" || !strings.HasPrefix(refund.ID, "re_") || refund.Amount != 2000 ||
			refund.Charge.ID != charge.ID || refund.Status != stripe.RefundStatusSucceeded {
			t.Errorf("dashboard refund answered %+v", refund)
		}
		var refused controlRefusal
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/refund", "", http.StatusConflict, &refused)
		if refused.Code != "charge_already_refunded" || !strings.Contains(refused.Error, charge.ID) {
			t.Errorf("second refund refused with %+v", refused)
		}
		control(t, b.server.URL, http.MethodPost, "charges/ch_missing/refund", "", http.StatusNotFound, &refused)
		if refused.Code != "resource_missing" {
			t.Errorf("refund of an unknown charge refused with %+v", refused)
		}

		// The API sees the dashboard's refund, and refuses another as it would its own.
		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || !got.Refunded || got.AmountRefunded != 2000 {
			t.Fatalf("want the charge refunded, got %+v, %v", got, err)
		}
		_, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeAlreadyRefunded)
	})

	t.Run("DisputeOverHTTP", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge := b.chargeRide(t, "ride-1")

		var dispute stripe.Dispute
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/dispute", "", http.StatusOK, &dispute)
		if dispute.Object != "dispute" || !strings.HasPrefix(dispute.ID, "dp_") || dispute.Charge.ID != charge.ID ||
			dispute.Amount != 2000 || dispute.Currency != stripe.CurrencyUSD ||
			dispute.Reason != stripe.DisputeReasonFraudulent || dispute.Status != stripe.DisputeStatusNeedsResponse {
			t.Errorf("dispute answered %+v", dispute)
		}
		var refused controlRefusal
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/dispute", "", http.StatusConflict, &refused)
		if refused.Code != "charge_disputed" {
			t.Errorf("second dispute refused with %+v", refused)
		}
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/refund", "", http.StatusConflict, &refused)
		if refused.Code != "charge_disputed" {
			t.Errorf("dashboard refund of a disputed charge refused with %+v", refused)
		}
		control(t, b.server.URL, http.MethodPost, "charges/ch_missing/dispute", "", http.StatusNotFound, nil)

		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || !got.Disputed {
			t.Fatalf("want the charge disputed, got %+v, %v", got, err)
		}
		if got, err := b.stripe.Disputes.Get(dispute.ID, nil); err != nil || got.Charge.ID != charge.ID {
			t.Fatalf("want the dispute read back, got %+v, %v", got, err)
		}
		var state struct {
			Events []stripe.Event `json:"events"`
		}
		control(t, b.server.URL, http.MethodGet, "webhooks", "", http.StatusOK, &state)
		if n := len(state.Events); n != 2 || state.Events[1].Type != stripe.EventTypeChargeDisputeCreated {
			t.Errorf("events %+v, want charge.succeeded and charge.dispute.created", state.Events)
		}
	})

	t.Run("RefundOfADisputedChargeIsChargeDisputed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge := b.chargeRide(t, "ride-1")
		if _, err := b.server.DisputeCharge(charge.ID); err != nil {
			t.Fatal(err)
		}

		_, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))

		stripeErr := requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeDisputed)
		if want := "Charge " + charge.ID + " has been charged back; cannot issue a refund."; stripeErr.Msg != want {
			t.Errorf("got message %q, want %q", stripeErr.Msg, want)
		}
		if n := len(b.server.Refunds()); n != 0 {
			t.Errorf("want no refund stored, got %d", n)
		}
	})

	t.Run("GoMethodsRefuseAsStripeWould", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge := b.chargeRide(t, "ride-1")
		_, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_chargeCustomerFail").ID, "ride-declined"))
		requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		failed := b.server.Charges()[1]

		for _, c := range []struct {
			name string
			act  func() error
			code string
		}{
			{"refund unknown", func() error { _, err := b.server.RefundCharge("ch_missing"); return err }, "resource_missing"},
			{"dispute unknown", func() error { _, err := b.server.DisputeCharge("ch_missing"); return err }, "resource_missing"},
			{"refund failed", func() error { _, err := b.server.RefundCharge(failed.ID); return err }, ""},
			{"dispute failed", func() error { _, err := b.server.DisputeCharge(failed.ID); return err }, ""},
		} {
			var refused *fakestripe.RefusalError
			if err := c.act(); !errors.As(err, &refused) || refused.Code != c.code {
				t.Errorf("%s: got %v, want a refusal with code %q", c.name, err, c.code)
			}
		}

		refund, err := b.server.RefundCharge(charge.ID)
		if err != nil || refund.Amount != 2000 || refund.Charge != charge.ID {
			t.Fatalf("want the charge refunded in full, got %+v, %v", refund, err)
		}
		var refused *fakestripe.RefusalError
		if _, err := b.server.DisputeCharge(charge.ID); !errors.As(err, &refused) || refused.Code != "charge_already_refunded" {
			t.Errorf("dispute of a refunded charge: got %v", err)
		}
	})

	t.Run("AJournalKeepsDisputes", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, b := openJournaled(t, path)
		charge := b.chargeRide(t, "ride-1")
		part := refundParams(charge.ID, "part-1")
		part.Amount = stripe.Int64(500)
		if _, err := b.stripe.Refunds.New(part); err != nil {
			t.Fatal(err)
		}
		dispute, err := first.DisputeCharge(charge.ID)
		if err != nil {
			t.Fatal(err)
		}
		refundedOnDashboard := b.chargeRide(t, "ride-2")
		if _, err := first.RefundCharge(refundedOnDashboard.ID); err != nil {
			t.Fatal(err)
		}
		stopJournaled(t, first)

		second, b := openJournaled(t, path)
		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || !got.Disputed || got.AmountRefunded != 500 {
			t.Fatalf("want the charge disputed after a restart, got %+v, %v", got, err)
		}
		if got, err := b.stripe.Charges.Get(refundedOnDashboard.ID, nil); err != nil || !got.Refunded {
			t.Fatalf("want the dashboard's refund kept, got %+v, %v", got, err)
		}
		if disputes := second.Disputes(); len(disputes) != 1 || disputes[0].ID != dispute.ID || disputes[0].Amount != 1500 {
			t.Fatalf("want the dispute kept, got %+v", disputes)
		}
		_, err = b.stripe.Refunds.New(refundParams(charge.ID, "part-2"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeDisputed)
		if events := second.WebhookEvents(); len(events) != 0 {
			t.Errorf("a restarted stand-in emitted %d events replaying its journal", len(events))
		}
	})
}
