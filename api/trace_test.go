package api_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/spans"
	"github.com/rocketrides/rocketrides/internal/testing/ridetest"
)

// OpenTelemetry's global provider takes its first SDK for good: the package's tests share one
// exporter, and each reads only the traces of its own requests.
var (
	traceOnce     sync.Once
	traceExporter *tracetest.InMemoryExporter
)

func tracedSetup(t *testing.T) *testBundle {
	traceOnce.Do(func() {
		traceExporter = tracetest.NewInMemoryExporter()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(traceExporter)))
	})
	return setup(t, setupOpts{wrap: func(h http.Handler) http.Handler { return otelhttp.NewHandler(h, "api") }})
}

// traceOf returns the spans of the trace whose server span is name and holds attr.
func traceOf(t *testing.T, name string, attr attribute.KeyValue) tracetest.SpanStubs {
	t.Helper()
	all := traceExporter.GetSpans()
	i := slices.IndexFunc(all, func(s tracetest.SpanStub) bool {
		return s.Name == name && slices.Contains(s.Attributes, attr)
	})
	if i < 0 {
		t.Fatalf("no span %s with %v", name, attr)
	}
	var stubs tracetest.SpanStubs
	for _, s := range all {
		if s.SpanContext.TraceID() == all[i].SpanContext.TraceID() {
			stubs = append(stubs, s)
		}
	}
	return stubs
}

// TestTraces: the cancel and the webhook are traced as the booking is: the cancel's server span
// named for its route and found by its Idempotency-Key, with its atomic phases and the refund
// between them, and the webhook's server span. No span holds the rider's token, the webhook's
// secret or signature, or the Stripe key.
func TestTraces(t *testing.T) {
	t.Parallel()
	b := tracedSetup(t)
	const cancelKey = "cancel-traced-000000001"
	booked := b.postRide(t, b.Rider, "ride-traced-0000000001", testBody).rideCreated(t).Ride
	b.cancelRide(t, b.Rider, cancelKey, booked.ID).requireStatus(t, 200)
	disputed := b.postRide(t, b.Rider, "ride-traced-0000000002", testBody).rideCreated(t).Ride
	b.postEvent(t, stripeEvent("evt_traced_dispute", "charge.dispute.created", dispute(*disputed.StripeChargeID)),
		testWebhookSecret, time.Now()).requireStatus(t, 200)

	booking := traceOf(t, "POST /rides", spans.IdempotencyKey.String("ride-traced-0000000001"))
	cancel := traceOf(t, "POST /rides/{id}/cancel", spans.IdempotencyKey.String(cancelKey))
	var names []string
	for _, s := range cancel {
		if !strings.HasPrefix(s.Name, "postgres") {
			names = append(names, s.Name)
		}
	}
	if !slices.Contains(names, "foreign_mutation refund") || !slices.ContainsFunc(names, func(n string) bool {
		return strings.HasPrefix(n, spans.AtomicPhaseSpanPrefix+" ")
	}) {
		t.Errorf("want the cancel's trace to hold its atomic phases and the refund, got %v", names)
	}
	if !slices.ContainsFunc(cancel, func(s tracetest.SpanStub) bool { return slices.Contains(s.Attributes, spans.UserID.Int64(b.Rider.ID)) }) {
		t.Error("want the cancel's trace to name its rider")
	}

	var webhook tracetest.SpanStubs
	for _, s := range traceExporter.GetSpans() {
		if s.Name == "POST /webhooks/stripe" {
			webhook = append(webhook, s)
		}
	}
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
