package telemetry

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/rocketrides/rocketrides/internal/tracing"
)

// The attributes of a statement's span, OpenTelemetry's names for them.
const (
	dbSystem    = attribute.Key("db.system.name")
	dbQueryText = attribute.Key("db.query.text")
	dbBatchSize = attribute.Key("db.operation.batch.size")
)

// PgxTracer returns a pgx tracer that makes a client span of every statement and batch a pool
// sends inside a traced span (a request, an atomic phase, a job), when tracing is on; nil
// otherwise, which pgx takes as no tracer. Statements sent outside one (River's and the
// enqueuer's polls, the reaper's passes) make no trace each. A span holds the statement's text,
// never its arguments: they hold riders' data and tokens' hashes.
func PgxTracer() pgx.QueryTracer {
	if !Enabled() {
		return nil
	}
	return newPgxTracer(otel.GetTracerProvider())
}

func newPgxTracer(provider trace.TracerProvider) *pgxTracer {
	return &pgxTracer{tracer: provider.Tracer("github.com/rocketrides/rocketrides/internal/telemetry")}
}

type pgxTracer struct {
	tracer trace.Tracer
}

var (
	_ pgx.QueryTracer = (*pgxTracer)(nil)
	_ pgx.BatchTracer = (*pgxTracer)(nil)
)

// statementName names a statement's span for its first keyword (SELECT, INSERT, COMMIT...),
// past the comment lines that lead some statements: the text itself is an attribute, too long
// and too varied for a name.
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	for strings.HasPrefix(sql, "--") {
		_, rest, _ := strings.Cut(sql, "\n")
		sql = strings.TrimSpace(rest)
	}
	if i := strings.IndexAny(sql, " \n\t("); i > 0 {
		sql = sql[:i]
	}
	return "postgres " + strings.ToUpper(sql)
}

// statementSpanKey holds, in a statement's context, the span this tracer started for it: the
// end of a statement that got none must not end the span of whatever sent it.
type statementSpanKey struct{}

func (t *pgxTracer) start(ctx context.Context, name string, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, statementSpanKey{}, span)
}

func (t *pgxTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return t.start(ctx, statementName(data.SQL), dbSystem.String("postgresql"), dbQueryText.String(data.SQL))
}

func (t *pgxTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	endWith(ctx, data.Err)
}

func (t *pgxTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	size := 0
	if data.Batch != nil {
		size = data.Batch.Len()
	}
	return t.start(ctx, "postgres batch", dbSystem.String("postgresql"), dbBatchSize.Int(size))
}

// TraceBatchQuery records each statement of a batch as an event of the batch's span: they go
// to Postgres in one round trip, so they have no times of their own to show.
func (t *pgxTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span, ok := ctx.Value(statementSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	attrs := []attribute.KeyValue{dbQueryText.String(data.SQL)}
	if data.Err != nil {
		attrs = append(attrs, attribute.String("error", data.Err.Error()))
	}
	span.AddEvent("statement", trace.WithAttributes(attrs...))
}

func (t *pgxTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	endWith(ctx, data.Err)
}

// endWith ends the statement's span, if it got one.
func endWith(ctx context.Context, err error) {
	if span, ok := ctx.Value(statementSpanKey{}).(trace.Span); ok {
		tracing.End(span, err)
	}
}
