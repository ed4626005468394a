package workers

import (
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rocketrides/rocketrides/internal/jobargs"
	"github.com/rocketrides/rocketrides/internal/mailer"
	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
	"github.com/rocketrides/rocketrides/internal/testing/smtptest"
	"github.com/rocketrides/rocketrides/internal/testing/tracingtest"
	"github.com/rocketrides/rocketrides/internal/tracing"
)

// TestReceiptJoinsTheRidesTrace: a Runner works a receipt job whose metadata names the
// enqueuer's hand-off in a span that is the hand-off's child, and each attempt's SMTP send in a
// client span of that job's, with its error, the server and the message id, and never the
// rider's address. Not parallel: it installs the process's global TracerProvider and propagator.
func TestReceiptJoinsTheRidesTrace(t *testing.T) {
	recorder := tracingtest.Install(t)
	b := &testBundle{pool: dbtest.NewPool(t), smtp: smtptest.NewServer(t, smtptest.Options{})}
	rider := b.newRider(t)
	ride := b.newRide(t, rider, "ch_traced")
	b.smtp.FailNext(1, "451 4.3.0 Try again later")

	// The job as the enqueuer hands it over, under the request span that staged it.
	ctx, request := otel.Tracer("test").Start(t.Context(), "POST /rides")
	var handOffs tracing.HandOffs
	metadata, err := handOffs.Start(ctx, 1, rider.ID, jobargs.SendRideReceiptKind, tracing.Carrier(ctx), nil)
	if err != nil {
		t.Fatal(err)
	}
	handOffs.End(nil)
	request.End()
	traceID := request.SpanContext().TraceID()
	handOff := recorder.Span(traceID, "enqueuer.hand_off "+jobargs.SendRideReceiptKind)
	if handOff == nil {
		t.Fatal("no hand-off span")
	}
	inserter, err := river.NewClient(riverpgxv5.New(b.pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(t.Context(), receiptArgs(ride), &river.InsertOpts{Metadata: metadata}); err != nil {
		t.Fatal(err)
	}

	b.runRunner(t)

	// Two attempts: the first refused by the mail server, the second, River's retry a second
	// later, delivered.
	const workSpan = "river.work/" + jobargs.SendRideReceiptKind
	deadline := time.Now().Add(time.Minute)
	for len(spansNamed(recorder.Spans(traceID), workSpan)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("want two attempts of the job in the ride's trace within a minute, got spans %v", names(recorder.Spans(traceID)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	spans := recorder.Spans(traceID)
	works := spansNamed(spans, workSpan)
	sends := spansNamed(spans, "smtp.send")
	if len(sends) != 2 {
		t.Fatalf("want an SMTP span for each of the 2 attempts in the ride's trace, got %v", names(spans))
	}
	receipt := b.receipt(t, ride)
	if receipt == nil {
		t.Fatal("want the receipt recorded")
	}
	for i, work := range works {
		if work.Parent.SpanID() != handOff.SpanContext.SpanID() {
			t.Errorf("attempt %d: want the job's span a child of the hand-off %s, got parent %s", i+1, handOff.SpanContext.SpanID(), work.Parent.SpanID())
		}
		send := sends[i]
		if send.Parent.SpanID() != work.SpanContext.SpanID() {
			t.Errorf("attempt %d: want the SMTP span a child of the job's, got parent %s", i+1, send.Parent.SpanID())
		}
		for _, kv := range []attribute.KeyValue{
			attribute.String(mailer.AttributeServerAddress, "127.0.0.1"),
			attribute.String(mailer.AttributeMessageID, receipt.MessageID),
		} {
			if !hasAttribute(send.Attributes, kv) {
				t.Errorf("attempt %d: want attribute %s=%s, got %v", i+1, kv.Key, kv.Value.String(), send.Attributes)
			}
		}
		for _, s := range spans {
			for _, kv := range s.Attributes {
				if strings.Contains(kv.Value.String(), rider.Email) {
					t.Errorf("span %s holds the rider's address in %s", s.Name, kv.Key)
				}
			}
		}
	}
	if sends[0].Status.Code != codes.Error || !strings.Contains(sends[0].Status.Description, "451") || len(sends[0].Events) == 0 {
		t.Errorf("want the first send's span to record the server's 451, got %+v, events %v", sends[0].Status, sends[0].Events)
	}
	if sends[1].Status.Code == codes.Error {
		t.Errorf("want the second send's span without error, got %+v", sends[1].Status)
	}
}

func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func hasAttribute(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv == want {
			return true
		}
	}
	return false
}
