package fakestripe_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
)

// TestWebhooks receives the stand-in's webhook deliveries at a real endpoint and verifies them
// with stripe-go, as Rocket Rides' webhook handler would.
func TestWebhooks(t *testing.T) {
	t.Parallel()

	t.Run("SignedEventsForChargesRefundsAndDisputes", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)

		charge := b.chargeRide(t, "ride-1")
		part := refundParams(charge.ID, "cancel-1")
		part.Amount = stripe.Int64(500)
		refund, err := b.stripe.Refunds.New(part)
		if err != nil {
			t.Fatal(err)
		}
		dispute, err := b.server.DisputeCharge(charge.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := rc.waitFor(t, 3)

		want := []stripe.EventType{stripe.EventTypeChargeSucceeded, stripe.EventTypeChargeRefunded, stripe.EventTypeChargeDisputeCreated}
		if types := eventTypes(got); !slices.Equal(types, want) {
			t.Fatalf("got events %v, want %v", types, want)
		}
		for _, r := range got {
			if r.contentType != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q", r.contentType)
			}
			if _, err := webhook.ConstructEventWithOptions(r.body, r.signature, "whsec_wrong", webhook.ConstructEventOptions{}); !errors.Is(err, webhook.ErrNoValidSignature) {
				t.Errorf("want a wrong secret refused, got %v", err)
			}
			if r.event.APIVersion != stripe.APIVersion || r.event.Livemode || r.event.PendingWebhooks != 1 || !strings.HasPrefix(r.event.ID, "evt_") {
				t.Errorf("event envelope %+v", r.event)
			}
		}

		var succeeded stripe.Charge
		ev := requireVerified(t, got[0], stripe.EventTypeChargeSucceeded, &succeeded)
		if succeeded.ID != charge.ID || succeeded.Amount != 2000 || succeeded.Status != stripe.ChargeStatusSucceeded {
			t.Errorf("charge.succeeded carries %+v", succeeded)
		}
		if ev.Request == nil || !strings.HasPrefix(ev.Request.ID, "req_") || ev.Request.IdempotencyKey != "ride-1" {
			t.Errorf("charge.succeeded names request %+v, want the charge's", ev.Request)
		}

		var refunded stripe.Charge
		requireVerified(t, got[1], stripe.EventTypeChargeRefunded, &refunded)
		if refunded.ID != charge.ID || refunded.AmountRefunded != 500 || refunded.Refunded ||
			refunded.Refunds == nil || len(refunded.Refunds.Data) != 1 || refunded.Refunds.Data[0].ID != refund.ID {
			t.Errorf("charge.refunded carries %+v (refunds %+v)", refunded, refunded.Refunds)
		}

		var disputed stripe.Dispute
		ev = requireVerified(t, got[2], stripe.EventTypeChargeDisputeCreated, &disputed)
		if disputed.ID != dispute.ID || disputed.Object != "dispute" || disputed.Charge == nil || disputed.Charge.ID != charge.ID ||
			disputed.Amount != 1500 || disputed.Reason != stripe.DisputeReasonFraudulent || disputed.Status != stripe.DisputeStatusNeedsResponse {
			t.Errorf("charge.dispute.created carries %+v", disputed)
		}
		if ev.Request == nil || ev.Request.ID != "" || ev.Request.IdempotencyKey != "" {
			t.Errorf("charge.dispute.created names request %+v, want none", ev.Request)
		}

		events := b.server.WebhookEvents()
		if len(events) != 3 || events[0].ID != got[0].event.ID || events[2].Type != fakestripe.EventChargeDisputeCreated {
			t.Errorf("WebhookEvents %+v do not match what was delivered", events)
		}
	})

	t.Run("FullRefundShowsTheChargeRefunded", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)
		charge := b.chargeRide(t, "ride-1")
		if _, err := b.server.RefundCharge(charge.ID); err != nil {
			t.Fatal(err)
		}

		var refunded stripe.Charge
		ev := requireVerified(t, rc.waitFor(t, 2)[1], stripe.EventTypeChargeRefunded, &refunded)
		if !refunded.Refunded || refunded.AmountRefunded != 2000 || refunded.Refunds == nil || len(refunded.Refunds.Data) != 1 {
			t.Errorf("charge.refunded carries %+v", refunded)
		}
		if ev.Request.ID != "" {
			t.Errorf("a dashboard refund names request %q, want none", ev.Request.ID)
		}
	})

	t.Run("RetriesAFailedDeliveryUntil2xx", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, func(n int) int {
			if n == 0 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		b := setupWebhooks(t, rc)
		b.chargeRide(t, "ride-1")

		got := rc.waitFor(t, 2)
		for _, r := range got {
			requireVerified(t, r, stripe.EventTypeChargeSucceeded, nil)
		}
		if got[0].event.ID != got[1].event.ID {
			t.Errorf("retry delivered event %s, want %s again", got[1].event.ID, got[0].event.ID)
		}
		var deliveries []fakestripe.WebhookDelivery
		eventually(t, func() bool {
			deliveries = b.server.WebhookDeliveries()
			return len(deliveries) >= 2
		}, "two delivery attempts recorded")
		first, second := deliveries[0], deliveries[1]
		if first.Attempt != 1 || first.Status != 500 || first.Delivered || first.Error == "" ||
			second.Attempt != 2 || second.Status != 200 || !second.Delivered || second.EventID != got[0].event.ID {
			t.Errorf("deliveries %+v, want attempt 1 answered 500, attempt 2 answered 200", deliveries)
		}
		time.Sleep(100 * time.Millisecond) // several backoffs: a delivered event is not sent again
		if n := len(rc.received()); n != 2 {
			t.Errorf("receiver took %d deliveries, want 2", n)
		}
	})

	t.Run("RetriesWhenTheEndpointIsDown", func(t *testing.T) {
		t.Parallel()
		down := closedPortURL(t)
		server := fakestripe.NewTestServer(t, fakestripe.Options{
			Logger: testLogger(t), WebhookURL: down, WebhookSecret: testWebhookSecret,
			WebhookRetryBase: time.Millisecond, WebhookRetryMax: 5 * time.Millisecond,
		})
		b := &testBundle{server: server, stripe: newStripeClient(t, server.URL, testAPIKey, &http.Transport{})}
		b.chargeRide(t, "ride-1")

		var deliveries []fakestripe.WebhookDelivery
		eventually(t, func() bool {
			deliveries = server.WebhookDeliveries()
			return len(deliveries) >= 3
		}, "three failed attempts")
		for i, d := range deliveries[:3] {
			if d.Attempt != i+1 || d.Status != 0 || d.Delivered || d.Error == "" {
				t.Errorf("attempt %d recorded as %+v", i+1, d)
			}
		}
	})

	t.Run("DuplicateDeliversEachEventTwice", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)
		control(t, b.server.URL, http.MethodPost, "webhooks", `{"duplicate": 1}`, http.StatusOK, nil)
		b.chargeRide(t, "ride-1")

		got := rc.waitFor(t, 2)
		for _, r := range got {
			requireVerified(t, r, stripe.EventTypeChargeSucceeded, nil)
		}
		if got[0].event.ID != got[1].event.ID {
			t.Errorf("duplicates carry events %s and %s, want one ID", got[0].event.ID, got[1].event.ID)
		}
		var state struct {
			Deliveries []fakestripe.WebhookDelivery `json:"deliveries"`
		}
		eventually(t, func() bool {
			control(t, b.server.URL, http.MethodGet, "webhooks", "", http.StatusOK, &state)
			return len(state.Deliveries) >= 2
		}, "both copies recorded")
		if d := state.Deliveries; d[0].Copy != 0 || d[1].Copy != 1 || d[0].Attempt != 1 || d[1].Attempt != 1 {
			t.Errorf("deliveries %+v, want copies 0 and 1 at their first attempt", d)
		}
	})

	t.Run("ReorderDeliversNewestFirst", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)
		// A long window: the batch goes out when the second event comes, however slow the test.
		control(t, b.server.URL, http.MethodPost, "webhooks", `{"reorder": true, "reorder_window_ms": 60000}`, http.StatusOK, nil)
		charge := b.chargeRide(t, "ride-1")
		if n := len(rc.received()); n != 0 {
			t.Fatalf("receiver took %d deliveries while the first event was held", n)
		}
		control(t, b.server.URL, http.MethodPost, "charges/"+charge.ID+"/refund", "", http.StatusOK, nil)

		got := rc.waitFor(t, 2)
		want := []stripe.EventType{stripe.EventTypeChargeRefunded, stripe.EventTypeChargeSucceeded}
		if types := eventTypes(got); !slices.Equal(types, want) {
			t.Errorf("got events %v, want %v", types, want)
		}
	})

	t.Run("ReorderSendsALoneEventAfterItsWindow", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)
		b.server.SetWebhookBehavior(fakestripe.WebhookBehavior{Reorder: true, ReorderWindow: 20 * time.Millisecond})
		b.chargeRide(t, "ride-1")

		requireVerified(t, rc.waitFor(t, 1)[0], stripe.EventTypeChargeSucceeded, nil)
	})

	t.Run("DelayHoldsEachDelivery", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, nil)
		b := setupWebhooks(t, rc)
		control(t, b.server.URL, http.MethodPost, "webhooks", `{"delay_ms": 300}`, http.StatusOK, nil)
		start := time.Now()
		b.chargeRide(t, "ride-1")

		got := rc.waitFor(t, 1)
		if waited := got[0].at.Sub(start); waited < 300*time.Millisecond {
			t.Errorf("delivered %v after the charge, want at least 300ms", waited)
		}
	})

	t.Run("ControlRejectsBadBehavior", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, body := range []string{`{"duplicate": -1}`, `{"delay_ms": -5}`, `{"dupe": 1}`, ``} {
			control(t, b.server.URL, http.MethodPost, "webhooks", body, http.StatusBadRequest, nil)
		}
		var set struct {
			Duplicate int  `json:"duplicate"`
			Reorder   bool `json:"reorder"`
			DelayMS   int  `json:"delay_ms"`
		}
		control(t, b.server.URL, http.MethodPost, "webhooks", `{"duplicate": 2, "delay_ms": 10}`, http.StatusOK, &set)
		if set.Duplicate != 2 || set.DelayMS != 10 || set.Reorder {
			t.Errorf("control answered %+v", set)
		}
	})

	t.Run("WithoutAURLEventsAreRecordedNotDelivered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.chargeRide(t, "ride-1")

		var state struct {
			URL        string                       `json:"url"`
			Events     []stripe.Event               `json:"events"`
			Deliveries []fakestripe.WebhookDelivery `json:"deliveries"`
		}
		control(t, b.server.URL, http.MethodGet, "webhooks", "", http.StatusOK, &state)
		if state.URL != "" || len(state.Events) != 1 || state.Events[0].Type != stripe.EventTypeChargeSucceeded ||
			state.Events[0].PendingWebhooks != 0 || state.Deliveries == nil || len(state.Deliveries) != 0 {
			t.Errorf("control reports %+v", state)
		}
	})

	t.Run("ResetForgetsEventsAndPendingDeliveries", func(t *testing.T) {
		t.Parallel()
		rc := newWebhookReceiver(t, func(int) int { return http.StatusServiceUnavailable })
		b := setupWebhooks(t, rc)
		b.server.SetWebhookBehavior(fakestripe.WebhookBehavior{Duplicate: 3})
		b.chargeRide(t, "ride-1")
		rc.waitFor(t, 1)

		control(t, b.server.URL, http.MethodPost, "reset", "", http.StatusNoContent, nil)
		if events, deliveries := b.server.WebhookEvents(), b.server.WebhookDeliveries(); len(events) != 0 || len(deliveries) != 0 {
			t.Fatalf("after Reset: events %+v, deliveries %+v", events, deliveries)
		}
		time.Sleep(200 * time.Millisecond) // many backoffs: nothing is retried
		if deliveries := b.server.WebhookDeliveries(); len(deliveries) != 0 {
			t.Errorf("deliveries recorded after Reset: %+v", deliveries)
		}
	})

	t.Run("ClosingStopsPendingDeliveries", func(t *testing.T) {
		t.Parallel()
		// An endpoint that never answers, and one that always fails: Close abandons an attempt
		// in flight, and a delivery waiting for its retry.
		hang := make(chan struct{})
		hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-hang:
			}
		}))
		t.Cleanup(hanging.Close)
		t.Cleanup(func() { close(hang) })
		failing := newWebhookReceiver(t, func(int) int { return http.StatusInternalServerError })

		for _, endpoint := range []string{hanging.URL, failing.url} {
			server := fakestripe.New(fakestripe.Options{
				Logger: testLogger(t), WebhookURL: endpoint, WebhookSecret: testWebhookSecret,
				WebhookRetryBase: time.Hour,
			})
			hs := httptest.NewServer(server)
			b := &testBundle{stripe: newStripeClient(t, hs.URL, testAPIKey, &http.Transport{})}
			b.chargeRide(t, "ride-1")
			if endpoint == failing.url {
				failing.waitFor(t, 1)
			}

			closed := make(chan struct{})
			go func() {
				server.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(pollDeadline):
				t.Fatalf("Close did not return with a delivery pending to %s", endpoint)
			}
			hs.Close()
			server.Close() // closing again returns at once

		}
	})
}

// closedPortURL is the URL of a loopback port nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/webhooks"
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return url
}
