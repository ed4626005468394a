package fakestripe_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

func refundParams(chargeID, idempotencyKey string) *stripe.RefundParams {
	params := &stripe.RefundParams{Charge: stripe.String(chargeID), Reason: stripe.String(string(stripe.RefundReasonRequestedByCustomer))}
	params.SetIdempotencyKey(idempotencyKey)
	return params
}

// TestRefunds refunds charges through stripe-go as Stripe would: in full by default, once per
// Idempotency-Key, never past what the charge has left.
func TestRefunds(t *testing.T) {
	t.Parallel()

	t.Run("InFullOncePerKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_visa").ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}
		refund, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil || refund.Amount != 2000 || refund.Charge.ID != charge.ID || refund.Status != stripe.RefundStatusSucceeded {
			t.Fatalf("want the whole charge refunded, got %+v, %v", refund, err)
		}
		again, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil || again.ID != refund.ID || !replayed(again.LastResponse) {
			t.Fatalf("want refund %s replayed, got %+v, %v", refund.ID, again, err)
		}
		_, err = b.stripe.Refunds.New(refundParams(charge.ID, "cancel-2"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeChargeAlreadyRefunded)

		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || !got.Refunded || got.AmountRefunded != 2000 {
			t.Fatalf("want the charge refunded, got %+v, %v", got, err)
		}
		if got, err := b.stripe.Refunds.Get(refund.ID, nil); err != nil || got.Amount != 2000 {
			t.Fatalf("want the refund read back, got %+v, %v", got, err)
		}
		if refunds := b.server.Refunds(); len(refunds) != 1 || refunds[0].IdempotencyKey != "cancel-1" {
			t.Fatalf("want one refund, got %+v", refunds)
		}
	})

	// Refunds have a fault queue of their own: the refund is made and its answer lost, and the
	// retry under the same key gets it replayed rather than a second refund.
	t.Run("FaultsStrikeRefunds", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_visa").ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}
		b.server.InjectRefundFaults(fakestripe.FaultChargeThenDrop, 1)
		// stripe-go retries a dropped connection by itself, and gets the refund replayed.
		first, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil || !replayed(first.LastResponse) {
			t.Fatalf("want the refund replayed to stripe-go's own retry, got %+v, %v", first, err)
		}
		if refunds := b.server.Refunds(); len(refunds) != 1 {
			t.Fatalf("want the refund made, got %d", len(refunds))
		}
		again, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil || !replayed(again.LastResponse) || len(b.server.Refunds()) != 1 {
			t.Fatalf("want the refund replayed and still one, got %+v, %v, %d", again, err, len(b.server.Refunds()))
		}
		if n := len(b.server.PendingFaults()); n != 0 {
			t.Fatalf("want charges' faults untouched, got %d", n)
		}
	})

	t.Run("InPartNeverPastWhatIsLeft", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		charge, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_visa").ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}
		part := refundParams(charge.ID, "part-1")
		part.Amount = stripe.Int64(1500)
		if _, err := b.stripe.Refunds.New(part); err != nil {
			t.Fatal(err)
		}
		tooMuch := refundParams(charge.ID, "part-2")
		tooMuch.Amount = stripe.Int64(600)
		_, err = b.stripe.Refunds.New(tooMuch)
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
		rest, err := b.stripe.Refunds.New(refundParams(charge.ID, "part-3"))
		if err != nil || rest.Amount != 500 {
			t.Fatalf("want the 500 left refunded, got %+v, %v", rest, err)
		}
	})

	t.Run("RefusesWhatCannotBeRefunded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.stripe.Refunds.New(refundParams("ch_missing", "r-1"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeResourceMissing)

		_, err = b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_chargeCustomerFail").ID, "ride-declined"))
		requireStripeError(t, err, http.StatusPaymentRequired, stripe.ErrorTypeCard, stripe.ErrorCodeCardDeclined)
		failed := b.server.Charges()[0]
		_, err = b.stripe.Refunds.New(refundParams(failed.ID, "r-2"))
		requireStripeError(t, err, http.StatusBadRequest, stripe.ErrorTypeInvalidRequest, "")
		if n := len(b.server.Refunds()); n != 0 {
			t.Fatalf("want no refund stored, got %d", n)
		}
	})

	t.Run("AJournalKeepsThem", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fakestripe.jsonl")
		first, b := openJournaled(t, path)
		charge, err := b.stripe.Charges.New(rideChargeParams(b.createCustomer(t, "tok_visa").ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}
		refund, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil {
			t.Fatal(err)
		}
		stopJournaled(t, first)

		second, b := openJournaled(t, path)
		if got, err := b.stripe.Charges.Get(charge.ID, nil); err != nil || !got.Refunded {
			t.Fatalf("want the charge refunded after a restart, got %+v, %v", got, err)
		}
		again, err := b.stripe.Refunds.New(refundParams(charge.ID, "cancel-1"))
		if err != nil || again.ID != refund.ID {
			t.Fatalf("want the refund replayed after a restart, got %+v, %v", again, err)
		}
		if refunds := second.Refunds(); len(refunds) != 1 {
			t.Fatalf("want one refund, got %+v", refunds)
		}
	})
}
