package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
)

// tracedSetup is setup with the API's handler traced as cmd/api traces it, into an SDK that
// records in memory: no other test of the package may run meanwhile.
func tracedSetup(t *testing.T) (*testBundle, *tracingtest.Recorder) {
	rec := tracingtest.Install(t)
	return setup(t, setupOpts{wrap: func(h http.Handler) http.Handler { return otelhttp.NewHandler(h, "api") }}), rec
}

// traceOf returns the spans of the trace whose server span is name and holds attr.
func traceOf(t *testing.T, rec *tracingtest.Recorder, name string, attr attribute.KeyValue) tracetest.SpanStubs {
	t.Helper()
	all := rec.Named(name)
	i := slices.IndexFunc(all, func(s tracetest.SpanStub) bool {
		return s.Name == name && slices.Contains(s.Attributes, attr)
	})
	if i < 0 {
		t.Fatalf("no span %s with %v", name, attr)
	}
	return rec.Spans(all[i].SpanContext.TraceID())
}

// TestTraces: the cancel and the webhook are traced as the booking is: the cancel's server span
// named for its route and found by its Idempotency-Key, with its atomic phases and the refund
// between them, and the webhook's server span. No span holds the rider's token, the webhook's
// secret or signature, or the Stripe key.
func TestTraces(t *testing.T) {
	b, rec := tracedSetup(t)
	const cancelKey = "cancel-traced-000000001"
	booked := b.postRide(t, b.Rider, "ride-traced-0000000001", testBody).rideCreated(t).Ride
	b.cancelRide(t, b.Rider, cancelKey, booked.ID).requireStatus(t, 200)
	disputed := b.postRide(t, b.Rider, "ride-traced-0000000002", testBody).rideCreated(t).Ride
	b.postEvent(t, stripeEvent("evt_traced_dispute", "charge.dispute.created", dispute(*disputed.StripeChargeID)),
		testWebhookSecret, time.Now()).requireStatus(t, 200)

	booking := traceOf(t, rec, "POST /rides", tracing.IdempotencyKey.String("ride-traced-0000000001"))
	cancel := traceOf(t, rec, "POST /rides/{id}/cancel", tracing.IdempotencyKey.String(cancelKey))
	var names []string
	for _, s := range cancel {
		if !strings.HasPrefix(s.Name, "postgres") {
			names = append(names, s.Name)
		}
	}
	if !slices.Contains(names, "foreign_mutation refund") || !slices.ContainsFunc(names, func(n string) bool {
		return strings.HasPrefix(n, tracing.AtomicPhaseSpanPrefix+" ")
	}) {
		t.Errorf("want the cancel's trace to hold its atomic phases and the refund, got %v", names)
	}
	if !slices.ContainsFunc(cancel, func(s tracetest.SpanStub) bool {
		return slices.Contains(s.Attributes, tracing.UserID.Int64(b.Rider.ID))
	}) {
		t.Error("want the cancel's trace to name its rider")
	}

	webhook := rec.Named("POST /webhooks/stripe")
	if len(webhook) == 0 {
		t.Fatal("no span of the webhook")
	}

	secrets := []string{b.Rider.Token, testWebhookSecret, ridetest.StripeAPIKey}
	for _, s := range slices.Concat(booking, cancel, webhook) {
		attrs := slices.Clone(s.Attributes)
		for _, ev := range s.Events {
			attrs = append(attrs, ev.Attributes...)
		}
		for _, kv := range attrs {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s holds %q in %s", s.Name, secret, kv.Key)
				}
			}
		}
	}
}
