package tracing

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// RiverPlugins are the plugins of every River client, the enqueuer's and the worker's: none while
// tracing is off, as otelriver allocates for every job it sees even with no-op globals.
// Otherwise, outermost first, continueJobTrace, which makes a job's work span the child of its
// hand-off, and otelriver, which records a span for each insert and each job worked.
//
// otelriver's own propagation stays off. On insert it would write into every job of a batch the
// context of the batch's one insert span, over the context of each job's own ride that
// HandOffs.Start wrote; on work it would only link the work span to the hand-off.
func RiverPlugins() []rivertype.Plugin {
	if !Enabled() {
		return nil
	}
	return []rivertype.Plugin{
		river.WorkerMiddlewareFunc(continueJobTrace),
		otelriver.NewMiddleware(&otelriver.MiddlewareConfig{EnableWorkSpanJobKindSuffix: true}),
	}
}

// continueJobTrace runs a job on a context whose parent span is the one its metadata names (see
// HandOffs.Start), so that the spans of its work join the trace of the request that staged it.
func continueJobTrace(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	return doInner(withRemoteParent(ctx, metadataCarrier(job.Metadata)))
}

// metadataCarrier reads the propagator's fields from the top level of a River job's metadata;
// empty when there are none, nil when the metadata is no JSON object.
func metadataCarrier(metadata []byte) map[string]string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(metadata, &fields) != nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	for _, key := range otel.GetTextMapPropagator().Fields() {
		var value string
		if json.Unmarshal(fields[key], &value) == nil {
			carrier[key] = value
		}
	}
	return carrier
}
