package tracing

// The spans that draw a request's part of a ride's trace: its atomic phases and its foreign
// state mutation, and the attributes an operator finds a ride by. A process that did not set up
// tracing (internal/telemetry) has OpenTelemetry's no-op tracer, and these record nothing.

import (
	"context"
	"net/textproto"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of a ride's spans. An operator finds the trace of a rider's request by
// IdempotencyKey (the client's Idempotency-Key header) or by UserID.
const (
	UserID         = attribute.Key("rocketrides.user_id")
	IdempotencyKey = attribute.Key("rocketrides.idempotency_key")
	RequestID      = attribute.Key("rocketrides.request_id")

	// RecoveryPointFrom and RecoveryPointTo are the points an atomic phase started from and
	// committed, and SerializableAttempts how many transactions it took (a conflict retries).
	RecoveryPointFrom    = attribute.Key("rocketrides.recovery_point.from")
	RecoveryPointTo      = attribute.Key("rocketrides.recovery_point.to")
	SerializableAttempts = attribute.Key("rocketrides.serializable_attempts")

	// StripeOutcome is what became of a foreign state mutation (phases.StripeOutcome), and
	// StripeReplayed whether Stripe answered with a replay of a call it had made already
	// (its Idempotent-Replayed header): a retry that charged nothing new.
	StripeOutcome   = attribute.Key("rocketrides.stripe.outcome")
	StripeReplayed  = attribute.Key("rocketrides.stripe.replayed")
	StripeRequestID = attribute.Key("rocketrides.stripe.request_id")

	// LinkedAs says what a link leads to.
	LinkedAs = attribute.Key("rocketrides.linked_as")
)

// AtomicPhaseSpanPrefix starts the name of every atomic phase's span; the points it covered
// follow, as in "atomic_phase started -> ride_created".
const AtomicPhaseSpanPrefix = "atomic_phase"

// phaseTracer is the tracer of a request's spans, looked up at each span so that it is the
// provider installed now, not the one of the moment the package was loaded.
func phaseTracer() trace.Tracer { return otel.Tracer("github.com/rocketrides/rocketrides/phases") }

// SetKey records the rider and the Idempotency-Key of a request on the span in ctx (the API's
// server span), so that the ride's trace is found by either.
func SetKey(ctx context.Context, userID int64, key string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(UserID.Int64(userID), IdempotencyKey.String(key))
	}
}

// StartAtomicPhase starts the span of one atomic phase; EndAtomicPhase names it once the
// phase knows where it ended. Like every span of a request's, it is started only inside a
// recording one (the API's server span, the completer's resumption): otherwise it would record
// nothing either, and starting it would still cost a context a phase.
func StartAtomicPhase(ctx context.Context) (context.Context, trace.Span) {
	return startInside(ctx, AtomicPhaseSpanPrefix)
}

func startInside(ctx context.Context, name string) (context.Context, trace.Span) {
	if parent := trace.SpanFromContext(ctx); !parent.IsRecording() {
		return ctx, parent
	}
	return phaseTracer().Start(ctx, name)
}

// EndAtomicPhase names the span of an atomic phase for the recovery points it moved the key
// between, or for the one it started from and "(rolled back)" when it committed nothing, and
// ends it. from is empty when no phase ran: the request had finished already, or its key was in
// use.
func EndAtomicPhase(span trace.Span, from, to string, attempts int, err error) {
	if !span.IsRecording() {
		return
	}
	switch {
	case from == "":
	case err != nil:
		span.SetName(AtomicPhaseSpanPrefix + " " + from + " (rolled back)")
		span.SetAttributes(RecoveryPointFrom.String(from))
	default:
		span.SetName(AtomicPhaseSpanPrefix + " " + from + " -> " + to)
		span.SetAttributes(RecoveryPointFrom.String(from), RecoveryPointTo.String(to))
	}
	span.SetAttributes(SerializableAttempts.Int(attempts))
	end(span, err)
}

// StartForeignMutation starts the span of a request's foreign state mutation (name: "charge"
// or "refund"). The Stripe request inside it is a client span of its own.
func StartForeignMutation(ctx context.Context, name string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return phaseTracer().Start(ctx, "foreign_mutation "+name)
}

// EndForeignMutation records what became of the mutation and ends its span. header is the
// answer's HTTP headers, nil if Stripe made nothing.
func EndForeignMutation(span trace.Span, outcome string, header map[string][]string, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(StripeOutcome.String(outcome))
	if h := textproto.MIMEHeader(header); h != nil {
		span.SetAttributes(StripeReplayed.Bool(h.Get("Idempotent-Replayed") == "true"),
			StripeRequestID.String(h.Get("Request-Id")))
	}
	end(span, err)
}

func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SetRequestID records the request id the API gave a request (its X-Request-Id) on the server
// span in ctx, which joins a trace to the request's log lines.
func SetRequestID(ctx context.Context, id string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(RequestID.String(id))
	}
}

// SetRoute names the server span in ctx for the route that served it ("POST /rides"), as
// OpenTelemetry names server spans: the path itself holds ids, one name per ride.
func SetRoute(ctx context.Context, method, route string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
}

// StartResumption starts the root span of the completer's run of an abandoned request: a
// trace of its own, found by the request's Idempotency-Key like the trace of the request that
// left it. End ends it.
func StartResumption(ctx context.Context, userID int64, key, from string) (context.Context, trace.Span) {
	return phaseTracer().Start(ctx, "completer.resume", trace.WithNewRoot(),
		trace.WithAttributes(UserID.Int64(userID), IdempotencyKey.String(key), RecoveryPointFrom.String(from)))
}

// End records err, if any, on span and ends it.
func End(span trace.Span, err error) { end(span, err) }

// TraceParent returns the W3C traceparent of the span in ctx, for a key to remember its
// writer by, or nil when the span records nothing (tracing is off).
func TraceParent(ctx context.Context) *string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	return &tp
}

// LinkEarlierAttempt links the span in ctx to the trace of an earlier attempt of the same
// request, whose traceparent its key remembers (nil: not traced). A retry's trace then leads to
// the attempt that left the key where the retry found it.
func LinkEarlierAttempt(ctx context.Context, traceParent *string) {
	span := trace.SpanFromContext(ctx)
	if traceParent == nil || !span.IsRecording() {
		return
	}
	earlier := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": *traceParent}))
	if earlier.IsValid() && earlier.TraceID() != span.SpanContext().TraceID() {
		span.AddLink(trace.Link{SpanContext: earlier, Attributes: []attribute.KeyValue{LinkedAs.String("earlier attempt")}})
	}
}
