package fakestripe_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

func TestFaults(t *testing.T) {
	t.Parallel()

	t.Run("Error500ThenRetryCharges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		b.server.InjectChargeFaults(fakestripe.FaultError500, 1)

		_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-500"))

		requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
		requireChargeCount(t, b.server, 0)

		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-500"))
		if err != nil {
			t.Fatalf("error retrying charge: %v", err)
		}
		if replayed(ch.LastResponse) {
			t.Errorf("retry after a 500 answered as a replay; the 500 must not be saved")
		}
		requireChargeCount(t, b.server, 1)
		if n := b.server.ChargeRequests(); n != 2 {
			t.Errorf("stand-in saw %d charge requests, want 2", n)
		}
	})

	t.Run("Error500SavedIsReplayedToRetries", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		b.server.InjectChargeFaults(fakestripe.FaultError500Saved, 1)

		_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-500-saved"))
		requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")

		_, err = b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-500-saved"))
		requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
		var stripeErr *stripe.Error
		if !errors.As(err, &stripeErr) || !replayed(stripeErr.LastResponse) {
			t.Fatalf("want the saved 500 replayed to the retry, got %v", err)
		}
		requireChargeCount(t, b.server, 0)
	})

	t.Run("TimeoutChargesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		b.server.InjectChargeFaults(fakestripe.FaultTimeout, 1)

		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		params := rideChargeParams(cus.ID, "ride-timeout")
		params.Context = ctx
		_, err := b.stripe.Charges.New(params)

		// stripe-go hands back net/http's *url.Error, not a *stripe.Error.
		var urlErr *url.Error
		if !errors.As(err, &urlErr) || !urlErr.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got error %v (%T), want a *url.Error timing out on the deadline", err, err)
		}
		requireChargeCount(t, b.server, 0)

		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-timeout"))
		if err != nil {
			t.Fatalf("error retrying charge: %v", err)
		}
		if replayed(ch.LastResponse) {
			t.Errorf("retry after a timeout answered as a replay")
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("ChargeThenDropThenRetryReplays", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		b.server.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
		// A fresh connection per request: on a reused one net/http would retry the dropped
		// request by itself (see the next test), hiding the failure.
		sc := newStripeClient(t, b.server.URL, testAPIKey, &http.Transport{DisableKeepAlives: true})

		_, err := sc.Charges.New(rideChargeParams(cus.ID, "ride-drop"))

		var stripeErr *stripe.Error
		if errors.As(err, &stripeErr) || !errors.Is(err, io.EOF) {
			t.Fatalf("got error %v (%T), want the connection's EOF", err, err)
		}
		charged := requireChargeCount(t, b.server, 1)[0]

		ch, err := sc.Charges.New(rideChargeParams(cus.ID, "ride-drop"))
		if err != nil {
			t.Fatalf("error retrying charge: %v", err)
		}
		if ch.ID != charged.ID || !replayed(ch.LastResponse) {
			t.Errorf("retry: charge %s, replayed %t; want the dropped charge %s replayed", ch.ID, replayed(ch.LastResponse), charged.ID)
		}
		requireChargeCount(t, b.server, 1)
		if got := b.server.ChargesForIdempotencyKey("ride-drop"); len(got) != 1 {
			t.Errorf("stand-in holds %d charges for the key, want 1", len(got))
		}
	})

	t.Run("ChargeThenDropOnReusedConnectionIsRetriedByNetHTTP", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa") // leaves an idle keep-alive connection behind
		b.server.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)

		// net/http's Transport resends a request that fails on a reused connection before any
		// response byte when it carries an Idempotency-Key header, as every stripe-go POST does.
		// stripe-go never sees the drop: it gets the replay.
		ch, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-drop-reused"))
		if err != nil {
			t.Fatalf("error charging: %v", err)
		}

		if !replayed(ch.LastResponse) {
			t.Errorf("answer is not a replay; did net/http stop retrying on reused connections?")
		}
		if n := b.server.ChargeRequests(); n != 2 {
			t.Errorf("stand-in saw %d charge requests, want 2", n)
		}
		requireChargeCount(t, b.server, 1)
	})

	t.Run("FaultsStrikeInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cus := b.createCustomer(t, "tok_visa")
		b.server.InjectChargeFaults(fakestripe.FaultError500, 2)
		b.server.InjectChargeFaults(fakestripe.FaultTimeout, 1)

		for range 2 {
			_, err := b.stripe.Charges.New(rideChargeParams(cus.ID, "ride-faults"))
			requireStripeError(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI, "")
		}
		if got := b.server.PendingFaults(); len(got) != 1 || got[0] != fakestripe.FaultTimeout {
			t.Errorf("pending faults %v, want [timeout]", got)
		}
	})

	t.Run("LatencyDelaysRequests", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const latency = 50 * time.Millisecond
		b.server.SetLatency(latency)

		start := time.Now()
		b.createCustomer(t, "tok_visa")

		if elapsed := time.Since(start); elapsed < latency {
			t.Errorf("request took %v, want at least %v", elapsed, latency)
		}
	})
}
