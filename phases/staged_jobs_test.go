package phases

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
)

// TestStagedJobCarriesTraceContext: a booking and a cancel made under a request's span stage
// their receipts with that span's trace context, for the enqueuer to continue the trace; with no
// propagator installed they stage none. Not parallel: it installs the process's global
// TracerProvider and propagator.
func TestStagedJobCarriesTraceContext(t *testing.T) {
	// The trace context staged with the one job of jobName.
	stagedTraceContext := func(t *testing.T, b *testBundle, jobName string) map[string]string {
		t.Helper()
		var carrier map[string]string
		err := b.Pool.QueryRow(t.Context(), `SELECT trace_context FROM staged_jobs WHERE job_name = $1`, jobName).Scan(&carrier)
		if err != nil {
			t.Fatal(err)
		}
		return carrier
	}
	requestSpan := func(t *testing.T, name string) (context.Context, trace.Span) {
		ctx, span := otel.Tracer("test").Start(t.Context(), name)
		t.Cleanup(func() { span.End() })
		return ctx, span
	}

	t.Run("BookingAndCancelCarryTheirRequestsTrace", func(t *testing.T) {
		tracingtest.Install(t)
		b := setup(t)

		bookCtx, bookSpan := requestSpan(t, "POST /rides")
		outcome, err := b.executor.CreateRide(bookCtx, newRequest(b.Rider))
		ride := requireCreated(t, outcome, err).Ride
		staged := tracingtest.Parent(stagedTraceContext(t, b, jobargs.SendRideReceiptKind))
		if !staged.IsValid() || staged.TraceID() != bookSpan.SpanContext().TraceID() || !staged.IsSampled() {
			t.Fatalf("want the receipt staged in trace %s, got %v", bookSpan.SpanContext().TraceID(), staged)
		}

		cancelCtx, cancelSpan := requestSpan(t, "POST /rides/{id}/cancel")
		outcome, err = b.executor.CancelRide(cancelCtx, newCancel(b.Rider, ride.ID, cancelKey))
		requireCancelled(t, outcome, err)
		staged = tracingtest.Parent(stagedTraceContext(t, b, jobargs.SendRefundReceiptKind))
		if !staged.IsValid() || staged.TraceID() != cancelSpan.SpanContext().TraceID() {
			t.Fatalf("want the refund receipt staged in trace %s, got %v", cancelSpan.SpanContext().TraceID(), staged)
		}
	})

	t.Run("NothingStagedWithoutAPropagator", func(t *testing.T) {
		tracingtest.Install(t)
		tracingtest.RemovePropagator()
		b := setup(t)

		ctx, _ := requestSpan(t, "POST /rides")
		outcome, err := b.executor.CreateRide(ctx, newRequest(b.Rider))
		requireCreated(t, outcome, err)
		if carrier := stagedTraceContext(t, b, jobargs.SendRideReceiptKind); carrier != nil {
			t.Fatalf("want no trace context staged (NULL), got %v", carrier)
		}
	})
}
