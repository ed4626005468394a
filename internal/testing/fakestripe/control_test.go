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
