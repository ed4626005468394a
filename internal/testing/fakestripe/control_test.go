package fakestripe_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// TestControlAPI drives the stand-in over HTTP, as a test in another process driving
// cmd/fakestripe would.
func TestControlAPI(t *testing.T) {
	t.Parallel()

	t.Run("InjectsFaultsAndReportsCharges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")

		var faults struct {
			PendingFaults []fakestripe.FaultKind `json:"pending_faults"`
		}
		control(t, b.server.URL, http.MethodPost, "faults", `{"kind": "error_500", "count": 2}`, http.StatusOK, &faults)
		control(t, b.server.URL, http.MethodPost, "faults", `{"kind": "charge_then_drop"}`, http.StatusOK, &faults)
		want := []fakestripe.FaultKind{fakestripe.FaultError500, fakestripe.FaultError500, fakestripe.FaultChargeThenDrop}
		if !slices.Equal(faults.PendingFaults, want) {
			t.Errorf("pending faults %v, want %v", faults.PendingFaults, want)
		}

		_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-control"))
		requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
		control(t, b.server.URL, http.MethodGet, "faults", "", http.StatusOK, &faults)
		if len(faults.PendingFaults) != 2 {
			t.Errorf("pending faults %v after one charge request, want 2 left", faults.PendingFaults)
		}

		control(t, b.server.URL, http.MethodPost, "reset", "", http.StatusNoContent, nil)
		cus = b.createCustomer(t, "tok_visa")
		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-control"))
		if err != nil {
			t.Fatalf("error charging after reset: %v", err)
		}

		var charges struct {
			ChargeRequests int                 `json:"charge_requests"`
			Charges        []fakestripe.Charge `json:"charges"`
		}
		control(t, b.server.URL, http.MethodGet, "charges?idempotency_key=ride-control", "", http.StatusOK, &charges)
		if charges.ChargeRequests != 1 || len(charges.Charges) != 1 || charges.Charges[0].ID != ch.ID ||
			charges.Charges[0].Amount != 2000 || charges.Charges[0].Status != fakestripe.ChargeStatusSucceeded {
			t.Errorf("control API reports %+v, want 1 request and charge %s", charges, ch.ID)
		}
	})

	// A harness in another process counts refunds per charge, tells the API's (under an
	// idempotency key) from the dashboard's (under none), and learns how many of the refund
	// faults it queued struck.
	t.Run("ListsRefundsAndPendingRefundFaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		first, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-1"))
		if err != nil {
			t.Fatal(err)
		}

		var faults struct {
			PendingFaults       []fakestripe.FaultKind `json:"pending_faults"`
			PendingRefundFaults []fakestripe.FaultKind `json:"pending_refund_faults"`
		}
		control(t, b.server.URL, http.MethodPost, "faults", `{"kind": "error_500", "count": 2, "on": "refunds"}`, http.StatusOK, &faults)
		if len(faults.PendingFaults) != 0 || !slices.Equal(faults.PendingRefundFaults, []fakestripe.FaultKind{fakestripe.FaultError500, fakestripe.FaultError500}) {
			t.Fatalf("want two refund faults pending and no charge fault, got %+v", faults)
		}
		_, err = b.stripe.Refunds.New(refundParams(first.ID, "cancel-1"))
		requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
		control(t, b.server.URL, http.MethodGet, "faults", "", http.StatusOK, &faults)
		if len(faults.PendingRefundFaults) != 1 {
			t.Fatalf("want one refund fault left after one refund request, got %+v", faults)
		}
		control(t, b.server.URL, http.MethodPost, "reset", "", http.StatusNoContent, nil)
		cus = b.createCustomer(t, "tok_visa")
		if first, err = b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-1")); err != nil {
			t.Fatal(err)
		}
		second, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-2"))
		if err != nil {
			t.Fatal(err)
		}

		var refunds struct {
			Refunds []fakestripe.Refund `json:"refunds"`
		}
		control(t, b.server.URL, http.MethodGet, "refunds", "", http.StatusOK, &refunds)
		if refunds.Refunds == nil || len(refunds.Refunds) != 0 {
			t.Fatalf("want an empty list of refunds, got %+v", refunds)
		}
		api, err := b.stripe.Refunds.New(refundParams(first.ID, "cancel-1"))
		if err != nil {
			t.Fatal(err)
		}
		var dashboard struct{ ID string } // the refund as Stripe's API shows it
		control(t, b.server.URL, http.MethodPost, "charges/"+second.ID+"/refund", "", http.StatusOK, &dashboard)

		control(t, b.server.URL, http.MethodGet, "refunds", "", http.StatusOK, &refunds)
		if len(refunds.Refunds) != 2 ||
			refunds.Refunds[0].ID != api.ID || refunds.Refunds[0].Charge != first.ID || refunds.Refunds[0].IdempotencyKey != "cancel-1" ||
			refunds.Refunds[0].Amount != 2000 || refunds.Refunds[0].Metadata == nil ||
			refunds.Refunds[1].ID != dashboard.ID || refunds.Refunds[1].Charge != second.ID || refunds.Refunds[1].IdempotencyKey != "" {
			t.Fatalf("want the API's refund of %s under cancel-1, then the dashboard's of %s under no key; got %+v", first.ID, second.ID, refunds.Refunds)
		}
		control(t, b.server.URL, http.MethodGet, "refunds?charge="+second.ID, "", http.StatusOK, &refunds)
		if len(refunds.Refunds) != 1 || refunds.Refunds[0].ID != dashboard.ID {
			t.Fatalf("want only the refund of %s, got %+v", second.ID, refunds.Refunds)
		}
	})

	t.Run("SetsLatency", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		control(t, b.server.URL, http.MethodPost, "latency", `{"ms": 30}`, http.StatusOK, nil)
		start := time.Now()
		b.createCustomer(t, "tok_visa")

		if elapsed := time.Since(start); elapsed < 30*time.Millisecond {
			t.Errorf("request took %v, want at least 30ms", elapsed)
		}
	})

	t.Run("RejectsBadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		for _, body := range []string{`{"kind": "meteor_strike"}`, `{"kind": "timeout", "count": 0}`, `{"knd": "timeout"}`, `not json`} {
			control(t, b.server.URL, http.MethodPost, "faults", body, http.StatusBadRequest, nil)
		}
		control(t, b.server.URL, http.MethodPost, "latency", `{"ms": -1}`, http.StatusBadRequest, nil)
		if got := b.server.PendingFaults(); len(got) != 0 {
			t.Errorf("pending faults %v after bad input, want none", got)
		}
	})
}

// control sends one control API request and decodes its answer into out, if not nil.
func control(t *testing.T, baseURL, method, path, body string, wantStatus int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, baseURL+fakestripe.ControlPathPrefix+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatalf("error building control request: %v", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("error calling control API: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != wantStatus {
		t.Fatalf("%s %s answered %d, want %d", method, path, res.StatusCode, wantStatus)
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("error decoding control answer: %v", err)
		}
	}
}
