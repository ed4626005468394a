package completer

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// TestResumptionIsTraced: the completer's run of an abandoned request is a trace of its own,
// found by the request's Idempotency-Key, that holds the atomic phases and the charge it ran.
func TestResumptionIsTraced(t *testing.T) {
	rec := tracingtest.Install(t)

	b := setup(t)
	key := b.abandon(t, b.Rider, models.RecoveryPointRideCreated)
	b.runOnce(t, b.completer, Result{Succeeded: 1})

	var root *tracetest.SpanStub
	all := rec.Named("completer.resume")
	for i, s := range all {
		for _, kv := range s.Attributes {
			if s.Name == "completer.resume" && kv.Key == tracing.IdempotencyKey && kv.Value.AsString() == key.IdempotencyKey {
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
	for _, s := range rec.Spans(root.SpanContext.TraceID()) {
		if s.Name != root.Name && !strings.HasPrefix(s.Name, "postgres") {
			names = append(names, s.Name)
		}
	}
	want := []string{"atomic_phase ride_created -> ride_created", "foreign_mutation charge", "atomic_phase ride_created -> finished"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("want the resumption's trace to hold %v, got %v", want, names)
	}
}
