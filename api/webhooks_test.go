package api_test

import (
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rocketrides/rocketrides/api"
	"github.com/rocketrides/rocketrides/internal/metrics"
	"github.com/rocketrides/rocketrides/internal/problem"
	"github.com/rocketrides/rocketrides/internal/testing/fakestripe"
	"github.com/rocketrides/rocketrides/models"
	"github.com/rocketrides/rocketrides/phases"
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

	// A type we do not act on is acknowledged whatever its id and creation time: we judge only
	// the events we apply.
	t.Run("OtherTypesAreCountedAndIgnored", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{metrics: m})
		customer := `{"id":"cus_1","object":"customer"}`
		year248073 := time.Date(248073, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		for _, event := range []string{
			stripeEvent("evt_other", "customer.created", customer),
			stripeEvent(strings.Repeat("e", 300), "customer.created", customer),
			stripeEventOf("evt_other_far_future", "customer.created", customer, "2023-10-16", year248073),
		} {
			b.postEvent(t, event, testWebhookSecret, time.Now()).requireStatus(t, 200)
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events`); n != 0 {
			t.Fatalf("want an ignored event not stored, got %d", n)
		}
		if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues(metrics.WebhookTypeOther, metrics.WebhookIgnored)); n != 3 {
			t.Errorf("want the events counted as ignored, got %v", n)
		}
	})

	// A dispute and a full refund can reach us before the ride records its charge: Stripe made
	// the charge, its answer was lost, and the rider's retry is yet to come. Each event is kept
	// for its charge, and the retry that records the charge applies it.
	t.Run("EventsBeforeTheRideRecordsTheChargeAreKept", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{freshStripeConnections: true, metrics: m})
		var seen []string // the charges of the rides booked so far
		var disputedRide int64
		for _, tc := range []struct {
			key, eventType, want string
			act                  func(chargeID string) error
		}{
			{testKey, "charge.dispute.created", "disputed", func(id string) error { _, err := b.Stripe.DisputeCharge(id); return err }},
			{testKey + "-2", "charge.refunded", "refunded", func(id string) error { _, err := b.Stripe.RefundCharge(id); return err }},
		} {
			// Charged, the answer lost, and Stripe unreachable for the rest of the request.
			b.Stripe.InjectChargeFaults(fakestripe.FaultChargeThenDrop, 1)
			b.postRide(t, b.Rider, tc.key, testBody).requireProblem(t, 503, problem.CodePaymentProcessorUnavailable)
			var chargeID string
			for _, c := range b.SucceededCharges() {
				if !slices.Contains(seen, c.ID) {
					chargeID = c.ID
				}
			}
			if chargeID == "" {
				t.Fatal("want Stripe to hold the charge whose answer was lost")
			}

			if err := tc.act(chargeID); err != nil {
				t.Fatal(err)
			}
			events := b.Stripe.WebhookEvents()
			event := events[len(events)-1]
			if event.Type != tc.eventType {
				t.Fatalf("want Stripe's last event a %s, got %s", tc.eventType, event.Type)
			}
			b.postEvent(t, string(event.Payload), testWebhookSecret, time.Now()).requireStatus(t, 200)
			if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE id = $1 AND charge_id = $2 AND ride_id IS NULL`,
				event.ID, chargeID); n != 1 {
				t.Fatalf("want the %s kept for its charge, got %d", tc.eventType, n)
			}

			ride := b.postRide(t, b.Rider, tc.key, testBody).rideCreated(t).Ride
			if *ride.StripeChargeID != chargeID {
				t.Fatalf("want the ride charged %s, got %s", chargeID, *ride.StripeChargeID)
			}
			if got := b.rideStatus(t, ride.ID); got != tc.want {
				t.Fatalf("want the retry to leave the ride %s, got %s", tc.want, got)
			}
			if n := b.Count(t, `SELECT count(*) FROM stripe_events WHERE id = $1 AND ride_id = $2`, event.ID, ride.ID); n != 1 {
				t.Fatalf("want the %s to name its ride once applied, got %d", tc.eventType, n)
			}
			// Stripe's next delivery of it changes nothing.
			b.postEvent(t, string(event.Payload), testWebhookSecret, time.Now()).requireStatus(t, 200)
			if got := b.rideStatus(t, ride.ID); got != tc.want {
				t.Fatalf("want a repeat to leave the ride %s, got %s", tc.want, got)
			}
			seen = append(seen, chargeID)
			if tc.want == "disputed" {
				disputedRide = ride.ID
			}
		}

		disputed, err := models.RideListDisputed(t.Context(), b.Pool, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(disputed) != 1 || disputed[0].ID != disputedRide || disputed[0].DisputedAt == nil {
			t.Fatalf("want admin list-disputed to list ride %d with its dispute's arrival, got %+v", disputedRide, disputed)
		}
		for _, eventType := range []string{"charge.dispute.created", "charge.refunded"} {
			for result, want := range map[string]float64{metrics.WebhookKept: 1, metrics.WebhookDuplicate: 1, metrics.WebhookApplied: 0} {
				if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues(eventType, result)); n != want {
					t.Errorf("want %v %s %s, got %v", want, eventType, result, n)
				}
			}
		}
	})

	// An account whose default API version is not stripe-go's sends events of its own version;
	// the fields we read are the same in every version, so they apply all the same.
	t.Run("EventOfAnotherAPIVersionApplies", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		event := stripeEventOf("evt_old_version", "charge.dispute.created", dispute(*ride.StripeChargeID), "2020-08-27", time.Now().Unix())
		b.postEvent(t, event, testWebhookSecret, time.Now()).requireStatus(t, 200)
		if got := b.rideStatus(t, ride.ID); got != "disputed" {
			t.Fatalf("want the ride disputed, got %s", got)
		}
	})

	// A signed event that cannot be applied as sent would fail the same way at every delivery:
	// it is a 400 that says why, logged once, and stores nothing. Stripe retries a 400 as it
	// would a 500; the 400 says the event is at fault, not us, and leaves our alerts on 5xx to
	// our own failures.
	t.Run("SignedButMalformedEventsAre400s", func(t *testing.T) {
		t.Parallel()
		m := metrics.NewAPI(nil)
		b := setup(t, setupOpts{metrics: m})
		ride := b.postRide(t, b.Rider, testKey, testBody).rideCreated(t).Ride
		charge := *ride.StripeChargeID
		year248073 := time.Date(248073, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		for _, tc := range []struct {
			name, event, detail string
		}{
			{"DisputeWithNoCharge", stripeEvent("evt_no_charge", "charge.dispute.created",
				`{"id":"dp_1","object":"dispute","amount":2000,"currency":"usd","status":"needs_response"}`), "names no charge id"},
			{"IDOf300Characters", stripeEvent(strings.Repeat("e", 300), "charge.refunded", refundedCharge(charge, true)), "its id must have 1 to 255 characters"},
			{"CreatedInTheYear248073", stripeEventOf("evt_far_future", "charge.refunded", refundedCharge(charge, true), "2023-10-16", year248073),
				"not a time to come"},
			{"ObjectIsAString", stripeEvent("evt_string", "charge.refunded", `"`+charge+`"`), "not a Stripe event"},
			{"BodyIsAString", `"evt_1"`, "not a Stripe event"},
		} {
			p := b.postEvent(t, tc.event, testWebhookSecret, time.Now()).requireProblem(t, 400, problem.CodeWebhookEventInvalid)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("%s: want the detail to say %q, got %q", tc.name, tc.detail, p.Detail)
			}
		}
		if n := b.Count(t, `SELECT count(*) FROM stripe_events`); n != 0 {
			t.Fatalf("want nothing stored, got %d events", n)
		}
		if got := b.rideStatus(t, ride.ID); got != "booked" {
			t.Fatalf("want the ride untouched, got %s", got)
		}
		refused := 0
		for _, line := range b.logs.lines(t) {
			switch line["msg"] {
			case "API: Stripe event refused":
				refused++
			case "API: failed to apply Stripe event":
				t.Fatalf("want no failure of ours logged, got %v", line)
			}
		}
		if refused != 5 {
			t.Fatalf("want each refusal logged once, got %d lines", refused)
		}
		if n := testutil.ToFloat64(m.StripeEvents.WithLabelValues(metrics.WebhookTypeOther, metrics.WebhookInvalid)) +
			testutil.ToFloat64(m.StripeEvents.WithLabelValues("charge.refunded", metrics.WebhookInvalid)) +
			testutil.ToFloat64(m.StripeEvents.WithLabelValues("charge.dispute.created", metrics.WebhookInvalid)); n != 5 {
			t.Errorf("want 5 events counted invalid, got %v", n)
		}
	})

	// A failure of ours is the one 5xx a signed event gets: with the database gone, a 503, and
	// Stripe delivers it again later.
	t.Run("DatabaseDownIs503", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		// A pool of a database that refuses connections: nothing listens on port 1.
		down, err := pgxpool.New(t.Context(), "postgres://rocketrides@127.0.0.1:1/rocketrides?connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(down.Close)
		logger := slog.New(slog.DiscardHandler)
		server := httptest.NewServer(api.NewServer(down, phases.New(down, b.StripeClient, logger, phases.Config{}), logger,
			api.Config{Limits: api.Limits{Off: true}, StripeWebhookSecret: testWebhookSecret}).Handler())
		t.Cleanup(server.Close)
		b.server = server
		b.postEvent(t, stripeEvent("evt_db_down", "charge.dispute.created", dispute("ch_db_down")), testWebhookSecret, time.Now()).
			requireProblem(t, 503, problem.CodeServiceUnavailable)
	})

	t.Run("OffWithoutASecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{webhooksOff: true})
		b.postEvent(t, stripeEvent("evt_1", "charge.refunded", refundedCharge("ch_1", true)), testWebhookSecret, time.Now()).
			requireProblem(t, 404, problem.CodeNotFound)
	})
}
