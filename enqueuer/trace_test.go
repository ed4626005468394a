package enqueuer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rocketrides/rocketrides/enqueuer"
	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
	"github.com/rocketrides/rocketrides/models"
)

// TestHandOffJoinsTheRidesTrace: each staged receipt that carries the trace context of the
// request that staged it is handed to River in a span that is a child of that request's span, and
// its River job's metadata names the hand-off, for the worker to continue. Two rides handed over
// in one batch each keep their own trace; a job staged with tracing off gets no span. Not
// parallel: it installs the process's global TracerProvider and propagator.
func TestHandOffJoinsTheRidesTrace(t *testing.T) {
	recorder := tracingtest.Install(t)
	b := setup(t)
	riverClient, err := enqueuer.NewRiverClient(b.pool, b.logger) // the enqueuer's own, with its plugins
	if err != nil {
		t.Fatal(err)
	}
	e, err := enqueuer.New(b.pool, riverClient, jobargs.DecodeStagedJob, b.logger, enqueuer.Config{JobNames: testJobNames})
	if err != nil {
		t.Fatal(err)
	}

	receipt := func(rideID int64) jobargs.SendRideReceipt {
		return jobargs.SendRideReceipt{RideID: rideID, UserID: testUserID, Amount: 2000, Currency: "usd"}
	}
	firstRequest, firstStaged := b.stageUnder(t, jobargs.SendRideReceiptKind, receipt(1), true)
	secondRequest, secondStaged := b.stageUnder(t, jobargs.SendRideReceiptKind, receipt(2), true)
	b.stageUnder(t, jobargs.SendRideReceiptKind, receipt(3), false)

	runOnce(t, e, enqueuer.Result{Enqueued: 3})

	metadataByRide := map[string]map[string]any{}
	for _, j := range b.riverJobs(t) {
		var args struct {
			RideID string `json:"ride_id"`
		}
		if err := json.Unmarshal(j.Args, &args); err != nil {
			t.Fatal(err)
		}
		metadataByRide[args.RideID] = j.Metadata
	}
	for _, tt := range []struct {
		ride     string
		request  trace.SpanContext
		stagedID int64
	}{
		{"1", firstRequest, firstStaged},
		{"2", secondRequest, secondStaged},
	} {
		handOff := recorder.Span(tt.request.TraceID(), "enqueuer.hand_off "+jobargs.SendRideReceiptKind)
		if handOff == nil {
			t.Fatalf("ride %s: no hand-off span in the trace of the request that staged it; spans: %v", tt.ride, recorder.Spans(tt.request.TraceID()))
		}
		if handOff.Parent.SpanID() != tt.request.SpanID() {
			t.Errorf("ride %s: want the hand-off a child of request span %s, got parent %s", tt.ride, tt.request.SpanID(), handOff.Parent.SpanID())
		}
		want := []attribute.KeyValue{
			tracing.StagedJobID.Int64(tt.stagedID),
			tracing.JobKind.String(jobargs.SendRideReceiptKind),
			tracing.UserID.Int64(testUserID),
		}
		for _, kv := range want {
			if !hasAttribute(handOff.Attributes, kv) {
				t.Errorf("ride %s: want attribute %s=%s, got %v", tt.ride, kv.Key, kv.Value.String(), handOff.Attributes)
			}
		}

		metadata := metadataByRide[tt.ride]
		traceparent, _ := metadata["traceparent"].(string)
		carried := tracingtest.Parent(map[string]string{"traceparent": traceparent})
		if carried.TraceID() != tt.request.TraceID() || carried.SpanID() != handOff.SpanContext.SpanID() {
			t.Errorf("ride %s: want the River job's metadata to name hand-off %s of trace %s, got %v", tt.ride, handOff.SpanContext.SpanID(), tt.request.TraceID(), metadata)
		}
		if _, ok := metadata[jobargs.StagedAtKey]; !ok {
			t.Errorf("ride %s: the trace context replaced the staged time: %v", tt.ride, metadata)
		}
	}
	if _, ok := metadataByRide["3"]["traceparent"]; ok {
		t.Errorf("want no trace context for the job staged with tracing off, got %v", metadataByRide["3"])
	}
	if n := len(recorder.Named("enqueuer.hand_off " + jobargs.SendRideReceiptKind)); n != 2 {
		t.Errorf("want a hand-off span for each of the 2 traced jobs, got %d", n)
	}
	// otelriver on the enqueuer's client: the batch's insert, in a trace of its own.
	if n := len(recorder.Named("river.insert_many")); n != 1 {
		t.Errorf("want otelriver's span of the batch's one insert, got %d", n)
	}
}

// A traced job that River refuses is set aside, and its hand-off span says why; the other job of
// its batch is handed over without error. Not parallel: it installs the global TracerProvider.
func TestHandOffOfASetAsideJobSaysWhy(t *testing.T) {
	recorder := tracingtest.Install(t)
	b := setup(t)
	handedOver, _ := b.stageUnder(t, testJobName, map[string]int{"n": 1}, true)
	refused, _ := b.stageUnder(t, testJobName, map[string]int{"n": 2}, true)

	runOnce(t, b.enqueuer(t, decodeWithPriority9For(2), enqueuer.Config{}), enqueuer.Result{Enqueued: 1, Failed: 1})

	const name = "enqueuer.hand_off " + testJobName
	if span := recorder.Span(refused.TraceID(), name); span == nil || span.Status.Code != codes.Error ||
		!strings.Contains(span.Status.Description, "set aside") || !strings.Contains(span.Status.Description, "priority") {
		t.Errorf("want the refused job's hand-off to say it was set aside for its priority, got %+v", span)
	}
	if span := recorder.Span(handedOver.TraceID(), name); span == nil || span.Status.Code == codes.Error {
		t.Errorf("want the other job's hand-off without error, got %+v", span)
	}
}

// stageUnder stages a job as phases does, in the trace of a request span of its own when traced,
// and returns that span's context and the staged job's id.
func (b *testBundle) stageUnder(t *testing.T, name string, args any, traced bool) (trace.SpanContext, int64) {
	t.Helper()
	ctx := context.Background()
	if traced {
		var span trace.Span
		ctx, span = otel.Tracer("test").Start(ctx, "POST /rides")
		defer span.End()
	}
	encoded, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	batch := &pgx.Batch{}
	models.StagedJobInsert(batch, testUserID, name, encoded, tracing.Carrier(ctx))
	batch.Queue(`SELECT lastval()`).QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
	if err := b.pool.SendBatch(t.Context(), batch).Close(); err != nil {
		t.Fatalf("error staging job: %s", err)
	}
	return trace.SpanContextFromContext(ctx), id
}

func hasAttribute(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv == want {
			return true
		}
	}
	return false
}
