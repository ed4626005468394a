// Package tracingtest installs an in-process OpenTelemetry SDK as the global TracerProvider,
// with the W3C TraceContext propagator, as a process's bootstrap does when tracing is configured,
// and records the spans in memory for a test to read.
//
// The globals are the process's: a test that installs them must not run in parallel with other
// tests of its package (no t.Parallel), and it restores the no-op globals when it ends.
package tracingtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Recorder holds the spans that ended while it was installed.
type Recorder struct {
	exporter *tracetest.InMemoryExporter
}

// Install makes an SDK that samples every span the global TracerProvider, and TraceContext the
// global propagator, until t ends.
func Install(t testing.TB) *Recorder {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		otel.SetTracerProvider(noop.NewTracerProvider())
		_ = provider.Shutdown(context.Background())
	})
	return &Recorder{exporter: exporter}
}

// RemovePropagator leaves the TracerProvider installed but no propagator, as a process whose
// bootstrap installed none: spans are recorded, and no trace context crosses a process.
func RemovePropagator() {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
}

// Spans returns the spans of trace that have ended, in the order they ended.
func (r *Recorder) Spans(trace trace.TraceID) tracetest.SpanStubs {
	var spans tracetest.SpanStubs
	for _, s := range r.exporter.GetSpans() {
		if s.SpanContext.TraceID() == trace {
			spans = append(spans, s)
		}
	}
	return spans
}

// Named returns the ended spans named name, of any trace.
func (r *Recorder) Named(name string) tracetest.SpanStubs {
	var spans tracetest.SpanStubs
	for _, s := range r.exporter.GetSpans() {
		if s.Name == name {
			spans = append(spans, s)
		}
	}
	return spans
}

// Span returns the ended span of trace named name, or nil.
func (r *Recorder) Span(trace trace.TraceID, name string) *tracetest.SpanStub {
	for _, s := range r.Spans(trace) {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

// Parent returns the span context that carrier names, as the TraceContext propagator reads it;
// invalid when it names none.
func Parent(carrier map[string]string) trace.SpanContext {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(carrier))
	return trace.SpanContextFromContext(ctx)
}
