// Package telemetry sets up OpenTelemetry tracing for a process from the standard OTEL_*
// environment variables, and wraps what carries a ride between processes (HTTP in and out,
// Postgres statements) in spans.
//
// Tracing is off unless an OTLP endpoint is set. Then nothing is installed: OpenTelemetry's
// global tracer stays its no-op, the HTTP handler and transports are returned unwrapped and the
// pool gets no tracer, so a process without tracing runs the code it ran before.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// enabled is set once Setup installed a tracer provider.
var enabled atomic.Bool

// Enabled reports whether this process exports traces.
func Enabled() bool { return enabled.Load() }

// Wanted reports whether the environment asks for traces: an OTLP endpoint is set (for all
// signals or for traces), and neither OTEL_SDK_DISABLED nor OTEL_TRACES_EXPORTER=none turns
// them off.
func Wanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and the W3C trace context propagator when the
// environment asks for traces (see Wanted), exporting OTLP over HTTP in batches. service is the
// process's service.name unless OTEL_SERVICE_NAME names another. The sampler, the exporter's
// headers, timeouts and batching are OpenTelemetry's own variables (OTEL_TRACES_SAMPLER,
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_BSP_*...), read by its SDK.
//
// shutdown flushes the spans not yet exported; call it before the process exits. Without
// tracing it does nothing.
func Setup(ctx context.Context, service string, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	if !Wanted(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	if enabled.Load() {
		return nil, errors.New("telemetry: Setup called twice")
	}
	// otlptracehttp reads the endpoint, headers and timeouts from the environment itself.
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("error creating the OTLP trace exporter: %w", err)
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithProcessPID(),
		resource.WithHost(),
	)
	if err != nil {
		return nil, fmt.Errorf("error describing the process for traces: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
	return provider.Shutdown, nil
}

// Handler wraps a server's handler in a server span per request, named for the route, when
// tracing is on; otherwise it returns h itself. No header or body is recorded: the request
// carries the rider's API token, and a webhook its signature.
func Handler(h http.Handler, service string) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, service, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if r.Pattern != "" {
			return r.Pattern
		}
		return r.Method
	}))
}

// Transport wraps a client's transport in a client span per request when tracing is on;
// otherwise it returns rt itself. It is for calls to a third party (Stripe): no trace context
// goes out in the request's headers, as our trace ids are none of Stripe's business, and no
// header or body is recorded, as a Stripe request carries the secret key and the card's source.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if !Enabled() {
		return rt
	}
	return otelhttp.NewTransport(rt,
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return r.Method + " " + r.URL.Path
		}))
}
