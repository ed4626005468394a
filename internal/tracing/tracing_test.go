package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
)

// With tracing off, as a process runs when OTEL_EXPORTER_OTLP_ENDPOINT is unset, a request
// stages no trace context, and looking for one allocates nothing: it runs on every ride. Not
// parallel, as AllocsPerRun asks.
func TestCarrierWithTracingOff(t *testing.T) {
	// The global tracer is the no-op one, as otelhttp's would be: its span names no trace.
	ctx, span := otel.Tracer("test").Start(context.Background(), "POST /rides")
	defer span.End()
	if carrier := Carrier(ctx); carrier != nil {
		t.Fatalf("want no trace context, got %v", carrier)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = Carrier(ctx) }); allocs != 0 {
		t.Fatalf("want no allocation, got %.0f a call", allocs)
	}
	if Enabled() {
		t.Fatal("want tracing off with no propagator installed")
	}
}
