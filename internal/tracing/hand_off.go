package tracing

import (
	"context"
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// HandOffs are the spans of the staged jobs that one enqueuer batch hands to River. Each is a
// child of the span of the request that staged its job, not a link: a job belongs to exactly one
// request, and the hand-off is the next step of that request's work. The zero value is ready to
// use, and costs nothing for jobs staged without a trace context.
type HandOffs struct {
	spans map[int64]trace.Span // by staged job id
}

// Start starts the hand-off span of staged job stagedJobID, of kind and of rider userID, as a
// child of the span that carrier names, and returns metadata, a River job's metadata (a JSON
// object, or empty), with that span's trace context added: the worker's job continues from it.
// A job staged with no trace context gets no span, and its metadata back unchanged.
func (h *HandOffs) Start(ctx context.Context, stagedJobID, userID int64, kind string, carrier map[string]string, metadata []byte) ([]byte, error) {
	if len(carrier) == 0 {
		return metadata, nil
	}
	ctx, span := otel.Tracer(instrumentationName).Start(withRemoteParent(ctx, carrier), "enqueuer.hand_off "+kind,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			StagedJobID.Int64(stagedJobID), JobKind.String(kind), UserID.Int64(userID)))
	if h.spans == nil {
		h.spans = make(map[int64]trace.Span)
	}
	h.spans[stagedJobID] = span
	return addToMetadata(metadata, Carrier(ctx))
}

// Span attributes of a hand-off, beside its rider's UserID. The rider is named by id only: an
// email address is personal data, which a trace backend is no place for.
const (
	StagedJobID = attribute.Key("rocketrides.staged_job_id")
	JobKind     = attribute.Key("rocketrides.job_kind")
)

// SetAside records on the hand-off span of staged job stagedJobID that River will never take
// the job, for err; the enqueuer has marked it failed in staged_jobs.
func (h *HandOffs) SetAside(stagedJobID int64, err error) {
	if span := h.spans[stagedJobID]; span != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "set aside: "+err.Error())
	}
}

// End ends every span once the batch's transaction has committed (err nil) or failed (err, and
// every job stays staged for the next pass).
func (h *HandOffs) End(err error) {
	for _, span := range h.spans {
		end(span, err)
	}
	h.spans = nil
}

// addToMetadata returns metadata, a JSON object or empty (meaning {}), with each field of
// carrier set as a top-level string.
func addToMetadata(metadata []byte, carrier map[string]string) ([]byte, error) {
	if len(carrier) == 0 {
		return metadata, nil
	}
	fields := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil {
			return nil, fmt.Errorf("error decoding job metadata: %w", err)
		}
	}
	for key, value := range carrier {
		encoded, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("error encoding trace context: %w", err)
		}
		fields[key] = encoded
	}
	return json.Marshal(fields) // cannot fail: every value is JSON that was just decoded or encoded
}
