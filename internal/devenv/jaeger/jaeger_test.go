package jaeger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rocketrides/rocketrides/internal/devenv/jaeger"
	"github.com/rocketrides/rocketrides/internal/devenv/supervisor"
	"github.com/rocketrides/rocketrides/internal/testing/proctest"
)

// TestJaegerFindsASpanByItsTag sends a parent span and its child with OpenTelemetry's own SDK
// and OTLP/HTTP exporter, as the processes do, to a Jaeger of the test's own, and finds them
// again through the query client by the parent's tag: one trace, the child's parent reference,
// kind and event intact. Another value of the tag finds nothing, and Stop ends Jaeger cleanly.
func TestJaegerFindsASpanByItsTag(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	root, err := supervisor.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log proctest.SyncBuffer
	server, err := jaeger.Start(ctx, jaeger.Config{Root: root, Output: &log})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = server.Stop()
		}
	})

	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(server.OTLPEndpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	const service = "jaeger-harness-test"
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
	tracer := provider.Tracer("jaeger_test")
	const key = "harness-key-0000000001"
	spanCtx, parent := tracer.Start(ctx, "parent", trace.WithAttributes(attribute.String("rocketrides.test_key", key)))
	_, child := tracer.Start(spanCtx, "child", trace.WithSpanKind(trace.SpanKindClient))
	child.AddEvent("retried", trace.WithAttributes(attribute.Int("attempt", 2)))
	child.End()
	parent.End()
	if err := provider.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	client := &jaeger.Client{BaseURL: server.QueryURL}
	var found []jaeger.Trace
	waitFor(t, "the two spans in Jaeger", func() bool {
		found, err = client.FindTraces(ctx, service, map[string]string{"rocketrides.test_key": key})
		return err == nil && len(found) == 1 && len(found[0].Spans) == 2
	}, func() string { return log.String() })

	got := found[0]
	if want := parent.SpanContext().TraceID().String(); got.ID != want {
		t.Errorf("want trace %s, got %s", want, got.ID)
	}
	spans := map[string]jaeger.Span{}
	for _, s := range got.Spans {
		spans[s.Operation] = s
		if s.Service != service {
			t.Errorf("span %s: want service %s, got %q", s.Operation, service, s.Service)
		}
	}
	p, c := spans["parent"], spans["child"]
	if p.SpanID != parent.SpanContext().SpanID().String() || p.ParentSpanID != "" || p.Tags["rocketrides.test_key"] != key {
		t.Errorf("want the root span parent with its tag, got %+v", p)
	}
	if c.SpanID != child.SpanContext().SpanID().String() || c.ParentSpanID != p.SpanID {
		t.Errorf("want child's parent to be %s, got %+v", p.SpanID, c)
	}
	if c.Tags["span.kind"] != "client" {
		t.Errorf("want child's span.kind client, got tags %v", c.Tags)
	}
	if len(c.Logs) != 1 || c.Logs[0]["event"] != "retried" || c.Logs[0]["attempt"] != "2" {
		t.Errorf("want child's event retried, attempt 2, got %v", c.Logs)
	}

	byID, err := client.Trace(ctx, got.ID)
	if err != nil || byID.ID != got.ID || len(byID.Spans) != 2 {
		t.Errorf("want trace %s by its ID, got %+v, %v", got.ID, byID, err)
	}
	if _, err := client.Trace(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, jaeger.ErrTraceNotFound) {
		t.Errorf("want ErrTraceNotFound for a trace never sent, got %v", err)
	}
	if other, err := client.FindTraces(ctx, service, map[string]string{"rocketrides.test_key": "another-key"}); err != nil || len(other) != 0 {
		t.Errorf("want no trace for another key, got %d, %v", len(other), err)
	}
	if services, err := client.Services(ctx); err != nil || !slices.Contains(services, service) {
		t.Errorf("want %s among the services, got %v, %v", service, services, err)
	}

	stopped = true
	if err := server.Stop(); err != nil {
		t.Fatalf("want Jaeger to stop cleanly, got %v\n%s", err, log.String())
	}
	select {
	case <-server.Exited():
	default:
		t.Fatal("Jaeger is still running after Stop")
	}
}

// waitFor polls cond every 100 ms, for up to a minute, and fails the test with what it waited for
// and what output says if it never holds.
func waitFor(t *testing.T, what string, cond func() bool, output func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after a minute\n%s", what, output())
		}
		select {
		case <-t.Context().Done():
			t.Fatal(context.Cause(t.Context()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
