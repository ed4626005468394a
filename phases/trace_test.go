package phases

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// tracedContext installs an SDK (no other test of the package may run meanwhile), and returns a
// context holding a root span of a trace of the test's own, and the function that lists the
// spans of that trace that have ended.
func tracedContext(t *testing.T, rec *tracingtest.Recorder) (context.Context, func() tracetest.SpanStubs) {
	t.Helper()
	ctx, root := otel.Tracer("test").Start(context.Background(), t.Name())
	t.Cleanup(func() { root.End() })
	id := root.SpanContext().TraceID()
	return ctx, func() tracetest.SpanStubs { return rec.Spans(id) }
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spanNames(stubs tracetest.SpanStubs) []string {
	var names []string
	for _, s := range stubs {
		names = append(names, s.Name)
	}
	return names
}

// TestTraceOfARide: a booking draws the article in its trace. Its two atomic phases are spans
// named for the recovery points they moved the key between, and the charge between them is a
// span of its own, with its outcome and whether Stripe replayed it. A retry after the charge was
// made but not recorded shows Stripe's replay.
func TestTraceOfARide(t *testing.T) {
	rec := tracingtest.Install(t)
	b := setup(t)

	ctx, spansOf := tracedContext(t, rec)
	b.executor.hooks.inPhase = failChargeRecordOnce(b)
	if _, err := b.executor.CreateRide(ctx, newRequest(b.Rider)); err == nil {
		t.Fatal("want the first attempt to fail recording its charge")
	}
	first := spansOf()
	charge := requireSpan(t, first, "foreign_mutation charge")
	if v, _ := attr(charge, tracing.StripeOutcome); v.AsString() != string(StripeCharged) {
		t.Errorf("first charge: want outcome %q, got %q", StripeCharged, v.AsString())
	}
	if v, ok := attr(charge, tracing.StripeReplayed); !ok || v.AsBool() {
		t.Errorf("first charge: want replayed=false, got %v (set: %v)", v.AsBool(), ok)
	}
	phase1 := requireSpan(t, first, "atomic_phase started -> ride_created")
	if charge.Parent.SpanID() == phase1.SpanContext.SpanID() {
		t.Error("the charge runs between atomic phases, not inside one")
	}
	// The atomic phase that failed to record the charge committed nothing.
	failed := requireSpan(t, first, "atomic_phase ride_created (rolled back)")
	if failed.Status.Code.String() != "Error" {
		t.Errorf("want the failed atomic phase's span marked as an error, got %v", failed.Status)
	}

	firstTrace := phase1.SpanContext.TraceID()
	ctx, spansOf = tracedContext(t, rec)
	b.executor.hooks.inPhase = nil
	outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
	requireCreated(t, outcome, err)
	retry := spansOf()
	charge = requireSpan(t, retry, "foreign_mutation charge")
	if v, _ := attr(charge, tracing.StripeReplayed); !v.AsBool() {
		t.Errorf("the retry's charge: want replayed=true, Stripe having made it already; spans: %v", spanNames(retry))
	}
	for _, name := range []string{"atomic_phase ride_created -> ride_created", "atomic_phase ride_created -> finished"} {
		phase := requireSpan(t, retry, name)
		if v, _ := attr(phase, tracing.RecoveryPointFrom); v.AsString() != string(models.RecoveryPointRideCreated) {
			t.Errorf("%s: want from=ride_created, got %q", name, v.AsString())
		}
		if v, _ := attr(phase, tracing.SerializableAttempts); v.AsInt64() < 1 {
			t.Errorf("%s: want its transactions counted, got %d", name, v.AsInt64())
		}
	}
	// The retry found the key the first attempt left, and its trace leads there.
	resumed := requireSpan(t, retry, "atomic_phase ride_created -> ride_created")
	if len(resumed.Links) != 1 || resumed.Links[0].SpanContext.TraceID() != firstTrace {
		t.Errorf("want the retry's first atomic phase linked to the first attempt's trace %s, got %+v", firstTrace, resumed.Links)
	}
}

// failChargeRecordOnce returns an inPhase hook that fails, once, the phase that records the charge
// Stripe made.
func failChargeRecordOnce(b *testBundle) func(context.Context, models.DBTX, models.RecoveryPoint) error {
	var once sync.Once
	return func(_ context.Context, _ models.DBTX, p models.RecoveryPoint) error {
		var err error
		if p == models.RecoveryPointRideCreated && len(b.SucceededCharges()) > 0 {
			once.Do(func() { err = errInjected })
		}
		return err
	}
}

func requireSpan(t *testing.T, stubs tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	i := slices.IndexFunc(stubs, func(s tracetest.SpanStub) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("no span %q among %v", name, spanNames(stubs))
	}
	return stubs[i]
}
