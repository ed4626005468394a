// Package tracing carries a ride's trace from the request that stages a job, through the
// enqueuer's hand-off to River, to the worker that runs the job, so that one trace shows a ride
// from the request to the receipt (docs/operations.md, "A ride's trace, from the request to
// the receipt").
//
// It uses only OpenTelemetry's global API: the process's bootstrap installs a TracerProvider and
// the W3C TraceContext propagator when tracing is configured, and leaves the no-op globals in
// place otherwise. Then nothing here stores, starts or allocates anything on the request path.
//
// The trace context travels as the propagator writes it, a map such as {"traceparent": "00-…"}:
// in staged_jobs.trace_context from the request to the enqueuer, and as top-level keys of the
// River job's metadata from the enqueuer to the worker, the keys otelriver writes and reads too.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names this package's tracer, as OpenTelemetry asks: the package path.
const instrumentationName = "github.com/rocketrides/rocketrides/internal/tracing"

// Enabled reports whether the process traces: whether its bootstrap installed a propagator,
// which it does exactly when it installs a TracerProvider. River clients are built with
// otelriver only then (see RiverPlugins).
func Enabled() bool {
	return len(otel.GetTextMapPropagator().Fields()) > 0
}

// Carrier returns the trace context of ctx's span as the global propagator writes it, for a
// staged job to carry; nil when ctx has no span or no propagator is installed. With tracing off
// it returns before the propagator is asked, so that the request path allocates nothing.
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// withRemoteParent returns ctx with the span that carrier names as its parent, so that the next
// span started on it is that span's child. An empty carrier returns ctx unchanged.
func withRemoteParent(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(carrier))
}
