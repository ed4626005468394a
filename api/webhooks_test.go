package api_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
)

func TestStripeWebhook(t *testing.T) {
	t.Parallel()

	t.Run("RefundMarksTheRideOnce", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{metrics: m})
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		event := stripeEvent("evt_refund_1", "charge.refunded", refundedCharge(*ride.StripeChargeID, true))

		b.postEvent(t, event, testWebhookSecret, time.Now()).requireStatus(t, 200)
		if got := b.rideStatus(t, ride.ID); got != "refunded" {
			t.Fatalf("want the ride refunded, got %s", got)
		}
		// The same event again, as Stripe may deliver it, changes nothing.
		b.Exec(t, `UPDATE rides SET status = 'booked' WHERE id = $1`, ride.ID)
		b.postEvent(t, event, testWebhookSecret, time.Now()).requireStatus(t, 200)
		if got := b.rideStatus(t, ride.ID); got != "booked" {
			t.Fatalf("want a repeated event to change nothing, got %s", got)
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE id = 'evt_refund_1' AND ride_id = $1`, ride.ID); n != 1 {
			t.Fatalf("want the event recorded once with its ride, got %d", n)
		}
		for result, want := range map[string]float64{metrics.WebhookApplied: 1, metrics.WebhookDuplicate: 1} {
			if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues("charge.refunded", result)); n != want {
				t.Errorf("want %v charge.refunded %s, got %v", want, result, n)
			}
		}
	})

	t.Run("PartialRefundLeavesTheRideBooked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		b.postEvent(t, stripeEvent("evt_partial", "charge.refunded", refundedCharge(*ride.StripeChargeID, false)),
			testWebhookSecret, time.Now()).requireStatus(t, 200)
		if got := b.rideStatus(t, ride.ID); got != "booked" {
			t.Fatalf("want a partly refunded ride booked, got %s", got)
		}
	})

	// Events in any order leave a ride the same: a dispute outranks a refund, and our own cancel
	// outranks a refund Stripe reports.
	t.Run("AnyOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		first := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		second := b.postRide(t, b.Rider, testKey+"-2", testBody).rideCreated(t).Ride
		refund := func(charge, id string) {
			b.postEvent(t, stripeEvent(id, "charge.refunded", refundedCharge(charge, true)), testWebhookSecret, time.Now()).requireStatus(t, 200)
		}
		disputed := func(charge, id string) {
			b.postEvent(t, stripeEvent(id, "charge.dispute.created", dispute(charge)), testWebhookSecret, time.Now()).requireStatus(t, 200)
		}
		refund(*first.StripeChargeID, "evt_a1")
		disputed(*first.StripeChargeID, "evt_a2")
		disputed(*second.StripeChargeID, "evt_b1")
		refund(*second.StripeChargeID, "evt_b2")
		if a, b := b.rideStatus(t, first.ID), b.rideStatus(t, second.ID); a != "disputed" || b != "disputed" {
			t.Fatalf("want both rides disputed whatever the order, got %s and %s", a, b)
		}

		third := b.postRide(t, b.Rider, testKey+"-3", testBody).rideCreated(t).Ride
		b.cancelRide(t, b.Rider, cancelKey, third.ID).requireStatus(t, 200)
		refund(*third.StripeChargeID, "evt_c1")
		if got := b.rideStatus(t, third.ID); got != "cancelled" {
			t.Fatalf("want our cancel to outrank Stripe's refund event, got %s", got)
		}
	})

	t.Run("BadSignaturesStoreNothing", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{metrics: m})
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		event := stripeEvent("evt_forged", "charge.refunded", refundedCharge(*ride.StripeChargeID, true))

		b.postEvent(t, event, "whsec_someone_else", time.Now()).requireProblem(t, 400, problem.CodeWebhookSignatureInvalid)
		b.postEvent(t, event, testWebhookSecret, time.Now().Add(-6*time.Minute)).requireProblem(t, 400, problem.CodeWebhookSignatureInvalid)
		b.do(t, "POST", "/webhooks/stripe", map[string]string{"Content-Type": "application/json"}, event).
			requireProblem(t, 400, problem.CodeWebhookSignatureInvalid)
		if n := b.Count(t, `SELECT count(*) FROM stripe_events`); n != 0 {
			t.Fatalf("want nothing stored, got %d events", n)
		}
		if got := b.rideStatus(t, ride.ID); got != "booked" {
			t.Fatalf("want the ride untouched, got %s", got)
		}
		if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues(metrics.WebhookTypeOther, metrics.WebhookSignatureInvalid)); n != 3 {
			t.Errorf("want 3 refusals counted, got %v", n)
		}
	})

	t.Run("OtherTypesAreCountedAndIgnored", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{metrics: m})
		b.postEvent(t, stripeEvent("evt_other", "customer.created", `{"id":"cus_1","object":"customer"}`),
			testWebhookSecret, time.Now()).requireStatus(t, 200)
		if n := b.Count(t, `SELECT count(*) FROM stripe_events`); n != 0 {
			t.Fatalf("want an ignored event not stored, got %d", n)
		}
		if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues(metrics.WebhookTypeOther, metrics.WebhookIgnored)); n != 1 {
			t.Errorf("want the event counted as ignored, got %v", n)
		}
	})

	t.Run("OffWithoutASecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooksOff: true})
		b.postEvent(t, stripeEvent("evt_1", "charge.refunded", refundedCharge("ch_1", true)), testWebhookSecret, time.Now()).
			requireProblem(t, 404, problem.CodeNotFound)
	})
}
