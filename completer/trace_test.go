package completer

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/spans"
	"github.com/rocketrides/rocketrides/models"
)

// TestResumptionIsTraced: the completer's run of an abandoned request is a trace of its own,
// found by the request's Idempotency-Key, that holds the atomic phases and the charge it ran.
func TestResumptionIsTraced(t *testing.T) {
	// OpenTelemetry's global provider takes its first SDK for good: this is the package's only
	// test that installs one.
	exporter := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter)))

	b := setup(t)
	key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
	b.runOnce(t, b.completer, Result{Succeeded: 1})

	var root *tracetest.SpanStub
	all := exporter.GetSpans()
	for i, s := range all {
		for _, kv := range s.Attributes {
			if s.Name == "completer.resume" && kv.Key == spans.IdempotencyKey && kv.Value.AsString() == key.IdempotencyKey {
				root = &all[i]
			}
		}
	}
	if root == nil {
		t.Fatalf("no completer.resume span holds the key %q", key.IdempotencyKey)
	}
	if root.Parent.IsValid() {
		t.Error("want the resumption to start a trace of its own")
	}
	var names []string
	for _, s := range all {
		if s.SpanContext.TraceID() == root.SpanContext.TraceID() && s.Name != root.Name && !strings.HasPrefix(s.Name, "postgres") {
			names = append(names, s.Name)
		}
	}
	want := []string{"atomic_phase ride_created -> ride_created", "foreign_mutation charge", "atomic_phase ride_created -> finished"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("want the resumption's trace to hold %v, got %v", want, names)
	}
}
